import { spawn, spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvoraApiError, EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { configLoad } from '../../src/server/config.js';
import { serverStart } from '../../src/server/server.js';
import { tlsLoad } from '../../src/server/tls.js';
import { silentLogger } from '../../src/logger.js';
import { testDatabaseCreate } from '../helpers/db.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { tlsCertsGenerate, type TlsCerts } from '../helpers/tls-certs.js';
import { jobInState, waitFor } from '../helpers/wait.js';

/**
 * TLS and mTLS on the gRPC port: the SDK over TLS, plaintext and certificate-less clients
 * refused, the certificate reloaded from its files without a restart, bad settings refused
 * at startup with one line.
 */

const certs: TlsCerts = tlsCertsGenerate('evora-a');
const other: TlsCerts = tlsCertsGenerate('evora-b');
afterAll(() => {
  certs.remove();
  other.remove();
});

const ROOT = join(import.meta.dirname, '../..');

/** Runs `evora <args>` from the sources (asynchronously: the server runs in this process). */
function evora(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { cwd: ROOT, env: { ...process.env, EVORA_HTTP_PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', fail);
    child.once('close', (code) => done({ code, stdout, stderr }));
  });
}

/** The error of a call that must fail, as the SDK raises it. */
async function failure(call: Promise<unknown>): Promise<EvoraApiError> {
  const err = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EvoraApiError);
  return err as EvoraApiError;
}

describe('TLS', () => {
  let address: string;
  beforeAll(async () => {
    ({ address } = await serverSetup({ tlsCert: certs.serverCert, tlsKey: certs.serverKey }));
  });

  it('the SDK submits over TLS and a worker runs the job', async () => {
    const client = new EvoraClient({ address, tlsCa: certs.read(certs.caCert) });
    try {
      const queue = queueName();
      const { job } = await client.submit({ queue, type: 'echo', payload: { n: 7 } });
      const w = new EvoraWorker({ address, queues: [queue], tlsCa: certs.read(certs.caCert), workerId: 'tls-worker' });
      w.handle<{ n: number }>('echo', async (j) => ({ twice: j.payload.n * 2 }));
      await w.start();
      try {
        const done = await jobInState(client, job.id, 'COMPLETED');
        expect(done.result).toEqual({ twice: 14 });
      } finally {
        await w.stop({ timeoutMs: 0, graceMs: 1_000 });
      }
    } finally {
      client.close();
    }
  });

  it('refuses a plaintext client, and a client that does not trust the CA', async () => {
    const plain = new EvoraClient({ address, deadlineMs: 3_000 });
    const untrusting = new EvoraClient({ address, deadlineMs: 3_000, tlsCa: other.read(other.caCert) });
    try {
      expect((await failure(plain.listQueues())).codeName).toBe('UNAVAILABLE');
      expect((await failure(untrusting.listQueues())).codeName).toBe('UNAVAILABLE');
    } finally {
      plain.close();
      untrusting.close();
    }
  });

  it('the SDK refuses contradictory TLS options with a TypeError', () => {
    expect(() => new EvoraClient({ address, tlsCert: certs.read(certs.clientCert) })).toThrow('tlsCert and tlsKey must be given together');
  });
});

describe('mTLS', () => {
  let address: string;
  beforeAll(async () => {
    ({ address } = await serverSetup({ tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.caCert }));
  });

  it('refuses a client without a certificate, and one whose certificate another CA signed', async () => {
    const anonymous = new EvoraClient({ address, deadlineMs: 3_000, tlsCa: certs.read(certs.caCert) });
    const stranger = new EvoraClient({
      address,
      deadlineMs: 3_000,
      tlsCa: certs.read(certs.caCert),
      tlsCert: other.read(other.clientCert),
      tlsKey: other.read(other.clientKey),
    });
    try {
      expect((await failure(anonymous.listQueues())).codeName).toBe('UNAVAILABLE');
      expect((await failure(stranger.listQueues())).codeName).toBe('UNAVAILABLE');
    } finally {
      anonymous.close();
      stranger.close();
    }
  });

  it('accepts a client whose certificate the client CA signed', async () => {
    const client = new EvoraClient({ address, tlsCa: certs.read(certs.caCert), tlsCert: certs.read(certs.clientCert), tlsKey: certs.read(certs.clientKey) });
    try {
      const { job } = await client.submit({ queue: queueName(), type: 'noop', payload: {} });
      expect((await client.get(job.id)).id).toBe(job.id);
    } finally {
      client.close();
    }
  });
});

describe('the CLI over mTLS', () => {
  let address: string;
  beforeAll(async () => {
    ({ address } = await serverSetup({ tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.caCert }));
  });

  it('takes the CA and the client certificate from flags or from the environment', async () => {
    const queue = queueName();
    const byFlags = await evora(['--address', address, '--tls-ca', certs.caCert, '--tls-cert', certs.clientCert, '--tls-key', certs.clientKey, '--json', 'submit', queue, 'noop']);
    // (stderr may hold Node's DEP0123 warning: grpc-js sends the IP address as the TLS server name.)
    expect(byFlags.stderr).not.toContain('evora:');
    expect(byFlags.code).toBe(0);
    const byEnv = await evora(['--address', address, '--json', 'list', '--queue', queue], {
      EVORA_TLS_CA: certs.caCert,
      EVORA_TLS_CLIENT_CERT: certs.clientCert,
      EVORA_TLS_CLIENT_KEY: certs.clientKey,
    });
    expect(byEnv.code).toBe(0);
    expect(JSON.stringify(JSON.parse(byEnv.stdout))).toContain(queue);
  });

  it('without a client certificate the server is unavailable to it (exit 5); a cert without a key is a usage error', async () => {
    const anonymous = await evora(['--address', address, '--tls-ca', certs.caCert, '--timeout', '3s', 'queues']);
    expect(anonymous.code).toBe(5);
    const half = await evora(['--address', address, '--tls-ca', certs.caCert, '--tls-cert', certs.clientCert, 'queues']);
    expect(half.code).toBe(2);
    expect(half.stderr.trim()).toBe('evora: --tls-cert (EVORA_TLS_CLIENT_CERT) and --tls-key (EVORA_TLS_CLIENT_KEY) must be given together');
  });
});

describe('certificate reload', () => {
  it('new connections get the certificate the files hold now, without a restart', async () => {
    // The server reads copies, which the test then overwrites with another CA's certificate.
    const live = tlsCertsGenerate('evora-live');
    copyFileSync(certs.serverCert, live.serverCert);
    copyFileSync(certs.serverKey, live.serverKey);
    try {
      const { address } = await serverSetup({ tlsCert: live.serverCert, tlsKey: live.serverKey, tlsReloadIntervalMs: '100' });
      const oldTrust = { address, deadlineMs: 3_000, tlsCa: certs.read(certs.caCert) };
      const newTrust = { address, deadlineMs: 3_000, tlsCa: other.read(other.caCert) };
      const before = new EvoraClient(oldTrust);
      const early = new EvoraClient(newTrust);
      try {
        await before.listQueues();
        expect((await failure(early.listQueues())).codeName).toBe('UNAVAILABLE');
      } finally {
        before.close();
        early.close();
      }
      // The key first, then the certificate: in between the pair does not fit, which the
      // server skips (it keeps the old pair) rather than serving a broken one.
      copyFileSync(other.serverKey, live.serverKey);
      copyFileSync(other.serverCert, live.serverCert);
      await waitFor(
        async () => {
          const c = new EvoraClient(newTrust);
          try {
            await c.listQueues();
            return true;
          } finally {
            c.close();
          }
        },
        { what: 'a client trusting only the new CA to connect' },
      );
      const stale = new EvoraClient(oldTrust);
      try {
        expect((await failure(stale.listQueues())).codeName).toBe('UNAVAILABLE');
      } finally {
        stale.close();
      }
    } finally {
      live.remove();
    }
  });
});

describe('bad TLS settings', () => {
  it('a certificate without a key, or a client CA without TLS, is refused with one line', () => {
    expect(() => configLoad({}, { EVORA_TLS_CERT: certs.serverCert })).toThrow(
      'EVORA_TLS_CERT (--tls-server-cert) and EVORA_TLS_KEY (--tls-server-key) must be set together',
    );
    expect(() => configLoad({}, { EVORA_TLS_CLIENT_CA: certs.caCert })).toThrow('EVORA_TLS_CLIENT_CA (--tls-client-ca) needs EVORA_TLS_CERT');
  });

  it('a missing file, a file that is not a certificate, or a key of another certificate fail the start with one line', async () => {
    const db = await testDatabaseCreate();
    try {
      const start = (env: Record<string, string>) => serverStart(configLoad({ host: '127.0.0.1', port: '0', httpPort: '0', databaseUrl: db.url }, env), silentLogger());
      const missing = join(certs.dir, 'missing.pem');
      await expect(start({ EVORA_TLS_CERT: missing, EVORA_TLS_KEY: certs.serverKey })).rejects.toThrow(
        `TLS: cannot read the certificate ${missing} (ENOENT)`,
      );
      await expect(start({ EVORA_TLS_CERT: certs.serverKey, EVORA_TLS_KEY: certs.serverKey })).rejects.toThrow(
        `TLS: the certificate ${certs.serverKey} is not a PEM certificate`,
      );
      await expect(start({ EVORA_TLS_CERT: certs.serverCert, EVORA_TLS_KEY: other.serverKey })).rejects.toThrow(
        `TLS: the key ${other.serverKey} does not fit the certificate ${certs.serverCert}`,
      );
    } finally {
      await db.drop();
    }
  });

  it('a certificate outside its validity, a half-written chain or key: one line naming the file (as a reload keeps the old set)', () => {
    const files = { certFile: certs.serverCert, keyFile: certs.serverKey, clientCaFile: certs.caCert };
    const leaf = new X509Certificate(readFileSync(certs.serverCert));
    expect(tlsLoad(files).validTo.toISOString()).toBe(new Date(leaf.validTo).toISOString());
    const after = new Date(new Date(leaf.validTo).getTime() + 1000);
    expect(() => tlsLoad(files, after)).toThrow(`TLS: the certificate ${certs.serverCert} expired at ${new Date(leaf.validTo).toISOString()}`);
    const before = new Date(new Date(leaf.validFrom).getTime() - 1000);
    expect(() => tlsLoad(files, before)).toThrow(`TLS: the certificate ${certs.serverCert} is not valid before ${new Date(leaf.validFrom).toISOString()}`);

    const chain = join(certs.dir, 'half-chain.pem');
    const ca = readFileSync(certs.caCert, 'utf8');
    writeFileSync(chain, readFileSync(certs.serverCert, 'utf8') + ca.slice(0, ca.length / 2));
    expect(() => tlsLoad({ ...files, certFile: chain })).toThrow(`TLS: the certificate ${chain} is not a complete PEM certificate chain`);
    const halfKey = join(certs.dir, 'half.key');
    const key = readFileSync(certs.serverKey, 'utf8');
    writeFileSync(halfKey, key.slice(0, key.length / 2));
    expect(() => tlsLoad({ ...files, keyFile: halfKey })).toThrow(`TLS: the key ${halfKey} is not a PEM private key`);
  });

  it('`evora serve` prints that line and exits non-zero', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', '0'], {
      cwd: ROOT,
      env: { ...process.env, EVORA_TLS_CERT: certs.serverCert, EVORA_TLS_KEY: join(certs.dir, 'nope.key'), EVORA_LOG_LEVEL: 'silent' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr.trim()).toBe(`evora: TLS: cannot read the key ${join(certs.dir, 'nope.key')} (ENOENT)`);
  });
});
