import { describe, expect, it } from 'vitest';
import { CONFIG_DOC } from '../../src/server/config.js';
import { addressWithPort, DEFAULT_PORT } from '../../src/sdk/index.js';
import { resolveAddress } from '../../src/sdk/connection.js';

/** An address without a port (the SDK's option, EVORA_ADDRESS, the CLI's --address): Evora's 50051, never grpc-js's default of 443. */
describe('addressWithPort', () => {
  it('adds 50051 where no port is given, keeps a given port, and keeps the scheme forms grpc-js reads', () => {
    const cases: [string, string][] = [
      ['db1', 'db1:50051'],
      ['db1.example.com', 'db1.example.com:50051'],
      ['10.0.0.5', '10.0.0.5:50051'],
      ['db1:7000', 'db1:7000'],
      ['localhost:50051', 'localhost:50051'],
      ['[::1]', '[::1]:50051'],
      ['[::1]:7000', '[::1]:7000'],
      ['::1', '[::1]:50051'],
      ['fe80::1', '[fe80::1]:50051'],
      ['dns:db1', 'dns:db1:50051'],
      ['dns:///db1', 'dns:///db1:50051'],
      ['dns://8.8.8.8/db1:7000', 'dns://8.8.8.8/db1:7000'],
      ['ipv4:10.0.0.1,10.0.0.2:7000', 'ipv4:10.0.0.1:50051,10.0.0.2:7000'],
      ['ipv6:[::1]', 'ipv6:[::1]:50051'],
      ['unix:/run/evora.sock', 'unix:/run/evora.sock'],
      ['unix:///run/evora.sock', 'unix:///run/evora.sock'],
      // A scheme another resolver registered with grpc-js reads (@grpc/grpc-js-xds): as given.
      ['xds:///evora', 'xds:///evora'],
      ['xds://control-plane/evora', 'xds://control-plane/evora'],
    ];
    for (const [given, dialled] of cases) expect(addressWithPort(given), given).toBe(dialled);
  });
});

describe('an address that cannot be dialled as meant', () => {
  it('is refused with a TypeError of one line (the CLI exits 2), not dialled to an UNAVAILABLE', () => {
    // Before: the URL was read as an IPv6 address ("[http://127.0.0.1:8080]:50051"), the
    // others failed as if the server were down (exit 5, after node's DeprecationWarning for ":50051").
    const cases: [string, string][] = [
      ['http://127.0.0.1:8080', 'is a URL: give host:port, such as 127.0.0.1:50051 (or a grpc-js target: dns:, ipv4:, ipv6:, unix:)'],
      ['https://db1.example.com', 'is a URL: give host:port, such as 127.0.0.1:50051 (or a grpc-js target: dns:, ipv4:, ipv6:, unix:)'],
      ['grpc://db1:50051', 'is a URL: give host:port, such as 127.0.0.1:50051 (or a grpc-js target: dns:, ipv4:, ipv6:, unix:)'],
      ['db1:99999', 'has a port that is not a whole number from 1 to 65535'],
      ['db1:0', 'has a port that is not a whole number from 1 to 65535'],
      ['db1:-1', 'has a port that is not a whole number from 1 to 65535'],
      ['db1:', 'has a port that is not a whole number from 1 to 65535'],
      ['[::1]:http', 'has a port that is not a whole number from 1 to 65535'],
      ['dns:db1:70000', 'has a port that is not a whole number from 1 to 65535'],
      [':50051', 'names no host (127.0.0.1:50051 is this machine)'],
      ['[::1', 'is not an IPv6 address in brackets, [::1] or [::1]:50051'],
    ];
    for (const [given, why] of cases) expect(() => addressWithPort(given), given).toThrow(new TypeError(`address "${given}" ${why}`));
    expect(() => resolveAddress('http://db1:8080')).toThrow(TypeError);
  });
});

describe('resolveAddress', () => {
  it('gives the option, else EVORA_ADDRESS, else the default, each with Evora\'s port when it names none', () => {
    const saved = process.env.EVORA_ADDRESS;
    try {
      delete process.env.EVORA_ADDRESS;
      expect(resolveAddress(undefined)).toBe('127.0.0.1:50051');
      expect(resolveAddress('db1')).toBe('db1:50051');
      process.env.EVORA_ADDRESS = 'db2';
      expect(resolveAddress(undefined)).toBe('db2:50051');
      expect(resolveAddress('db1:7000')).toBe('db1:7000');
    } finally {
      if (saved === undefined) delete process.env.EVORA_ADDRESS;
      else process.env.EVORA_ADDRESS = saved;
    }
  });

  it('the SDK\'s default port is the server\'s (the SDK imports no server code)', () => {
    expect(String(DEFAULT_PORT)).toBe(CONFIG_DOC.find((e) => e.key === 'port')?.default);
  });
});
