import { describe, expect, it } from 'vitest';
import { fields } from '../../src/cli/format.js';
import { addressWithPort } from '../../src/cli/client-context.js';

/** The CLI's label/value layout (`evora get`), pure formatting. */
describe('fields', () => {
  it('lines up the values; a value of several lines continues indented under its first line, never at the labels\' column', () => {
    const out = fields([
      ['state', 'DLQ'],
      ['last error', 'TypeError: boom\n    at handler (job.js:3)\r\n    at run (worker.js:9)'],
      ['payload', '{}'],
    ]);
    expect(out.split('\n')).toEqual([
      'state       DLQ',
      'last error  TypeError: boom',
      '                at handler (job.js:3)',
      '                at run (worker.js:9)',
      'payload     {}',
    ]);
  });
});

/** --address (and EVORA_ADDRESS) without a port: Evora's 50051, never grpc-js's default of 443. */
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
    ];
    for (const [given, dialled] of cases) expect(addressWithPort(given), given).toBe(dialled);
  });
});
