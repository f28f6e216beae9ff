import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverSetup } from '../helpers/server-setup.js';
import { tlsCertsGenerate } from '../helpers/tls-certs.js';
import { tokenInsert } from '../helpers/tokens.js';
import { grpcurlMarkdown, grpcurlSteps, grpcurlTlsSteps, type GrpcurlStep } from './grpcurl-commands.js';
import { REPO_ROOT, assertTools, findGrpcurl, skipUnless, titled } from './toolchain.js';

/**
 * Runs the grpcurl walk-through of docs/grpcurl.md, command line for command line, against
 * a live server, the way a reader would: with ADDR set, then JOB_ID and LEASE_TOKEN copied
 * from the outputs.
 */

const grpcurl = findGrpcurl();

it('docs/grpcurl.md is generated from test/interop/grpcurl-commands.ts', () => {
  const doc = readFileSync(join(REPO_ROOT, 'docs', 'grpcurl.md'), 'utf8');
  expect(doc, 'docs/grpcurl.md is stale: npx tsx test/interop/grpcurl-commands.ts > docs/grpcurl.md').toBe(grpcurlMarkdown());
});

it('the README shows exactly these grpcurl commands', () => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  for (const step of grpcurlSteps) expect(readme, `README.md lacks: ${step.command}`).toContain(step.command);
});

describe.skipIf(skipUnless('the grpcurl commands', grpcurl))(titled('the grpcurl commands of docs/grpcurl.md', grpcurl), () => {
  const vars: Record<string, string> = {};

  beforeAll(async () => {
    assertTools(grpcurl);
    const { address } = await serverSetup();
    vars.ADDR = address;
  });

  function step(id: string): GrpcurlStep {
    const s = grpcurlSteps.find((x) => x.id === id);
    if (!s) throw new Error(`no grpcurl step ${id}`);
    return s;
  }

  /** Runs a step's command line with bash, grpcurl first on PATH, and the variables set. */
  function runStep(id: string): Promise<string> {
    const { command } = step(id);
    const path = grpcurl.ok ? `${dirname(grpcurl.path)}:${process.env.PATH ?? ''}` : process.env.PATH;
    return new Promise((resolve, reject) => {
      execFile('bash', ['-euo', 'pipefail', '-c', command], { env: { ...process.env, PATH: path, ...vars }, timeout: 30_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`\`${command}\` failed: ${err.message}\n${stderr}`)) : resolve(stdout),
      );
    });
  }

  it('every step is covered by this test', () => {
    expect(grpcurlSteps.map((s) => s.id)).toEqual(['list', 'describe', 'health', 'queue', 'submit', 'claim', 'complete', 'get']);
  });

  it('1. list the services', async () => {
    const out = await runStep('list');
    expect(out.trim().split('\n').sort()).toEqual([
      'evora.v1.AuditService',
      'evora.v1.JobService',
      'evora.v1.QueueService',
      'evora.v1.ScheduleService',
      'evora.v1.TokenService',
      'evora.v1.WorkerService',
      'grpc.health.v1.Health',
    ]);
  });

  it('2. describe a service and a message', async () => {
    const out = await runStep('describe');
    expect(out).toContain('evora.v1.JobService is a service:');
    expect(out).toContain('rpc SubmitJob ( .evora.v1.SubmitJobRequest ) returns ( .evora.v1.SubmitJobResponse );');
    expect(out).toContain('evora.v1.SubmitJobRequest is a message:');
    expect(out).toContain('.google.protobuf.Struct payload = 3;');
  });

  it('3. health', async () => {
    expect(JSON.parse(await runStep('health'))).toEqual({ status: 'SERVING' });
  });

  it('4. create the queue', async () => {
    expect(JSON.parse(await runStep('queue'))).toMatchObject({ queue: { name: 'images', leaseSeconds: 300 }, created: true });
  });

  it('5. submit a job with a JSON payload', async () => {
    const out = JSON.parse(await runStep('submit'));
    expect(out).toMatchObject({
      created: true,
      job: { queue: 'images', type: 'resize', state: 'JOB_STATE_PENDING', payload: { image: 'cat.png', width: 4000, height: 3000 } },
    });
    vars.JOB_ID = out.job.id;
  });

  it('6. claim it with ClaimJobs', async () => {
    const out = JSON.parse(await runStep('claim'));
    expect(out.jobs).toHaveLength(1);
    expect(out.jobs[0]).toMatchObject({ job: { id: vars.JOB_ID, state: 'JOB_STATE_RUNNING', attempt: 1, workerId: 'grpcurl' } });
    expect(out.jobs[0].leaseToken).toMatch(/^[0-9a-f-]{36}$/);
    vars.LEASE_TOKEN = out.jobs[0].leaseToken;
  });

  it('7. complete it with CompleteJob', async () => {
    const out = JSON.parse(await runStep('complete'));
    expect(out).toMatchObject({ job: { id: vars.JOB_ID, state: 'JOB_STATE_COMPLETED' } });
  });

  it('8. read it back COMPLETED with GetJob', async () => {
    const out = JSON.parse(await runStep('get'));
    expect(out.job).toMatchObject({
      id: vars.JOB_ID,
      state: 'JOB_STATE_COMPLETED',
      attempt: 1,
      workerId: 'grpcurl',
      result: { thumbnail: 'cat_256x192.png', width: 256, height: 192 },
    });
    expect(Date.parse(out.job.finishedAt)).not.toBeNaN();
  });
});

describe.skipIf(skipUnless('the grpcurl TLS commands', grpcurl))(titled('the grpcurl TLS commands of docs/grpcurl.md', grpcurl), () => {
  // The doc's file names (ca.pem, client.pem, client.key) are the helper's, in its folder.
  const certs = tlsCertsGenerate('evora-grpcurl');
  afterAll(() => certs.remove());
  let tlsAddr = '';
  let mtlsAddr = '';
  let tlsDb = '';

  beforeAll(async () => {
    assertTools(grpcurl);
    ({ address: tlsAddr, databaseUrl: tlsDb } = await serverSetup({ tlsCert: certs.serverCert, tlsKey: certs.serverKey }));
    ({ address: mtlsAddr } = await serverSetup({ tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.caCert }));
  });

  /** Runs a TLS step's command (or the given variant of it) in the certificates' folder. */
  function runTls(command: string, addr: string, env: Record<string, string> = {}): Promise<{ ok: boolean; stdout: string; stderr: string }> {
    const path = grpcurl.ok ? `${dirname(grpcurl.path)}:${process.env.PATH ?? ''}` : process.env.PATH;
    return new Promise((resolve) => {
      execFile('bash', ['-euo', 'pipefail', '-c', command], { cwd: certs.dir, env: { ...process.env, PATH: path, ADDR: addr, ...env }, timeout: 30_000 }, (err, stdout, stderr) =>
        resolve({ ok: !err, stdout, stderr }),
      );
    });
  }

  const tlsStep = (id: string) => grpcurlTlsSteps.find((x) => x.id === id)!.command;

  it('health over TLS with the CA; refused with -plaintext', async () => {
    const run = await runTls(tlsStep('tls'), tlsAddr);
    expect(run.ok, run.stderr).toBe(true);
    expect(JSON.parse(run.stdout)).toEqual({ status: 'SERVING' });
    expect((await runTls('grpcurl -plaintext $ADDR grpc.health.v1.Health/Check', tlsAddr)).ok).toBe(false);
  });

  it('mTLS: submits with a client certificate; refused without one', async () => {
    const run = await runTls(tlsStep('mtls'), mtlsAddr);
    expect(run.ok, run.stderr).toBe(true);
    expect(JSON.parse(run.stdout)).toMatchObject({ created: true, job: { queue: 'images', type: 'resize', state: 'JOB_STATE_PENDING' } });
    const anonymous = await runTls(tlsStep('mtls').replace(' -cert client.pem -key client.key', ''), mtlsAddr);
    expect(anonymous.ok).toBe(false);
  });

  // Needs the server side of auth (a server enforcing tokens once its table has one); runs
  // last in this block, since the token turns auth on for the TLS server.
  it('TLS with a token: submits and lists with -H authorization; without a token UNAUTHENTICATED', async () => {
    const producer = await tokenInsert(tlsDb, { role: 'producer' });
    const run = await runTls(tlsStep('token'), tlsAddr, { EVORA_TOKEN: producer.secret });
    expect(run.ok, run.stderr).toBe(true);
    // Two JSON documents: the SubmitJob answer, then ListJobs'.
    const [submitted, listed] = run.stdout.split(/\n(?=\{)/).map((d) => JSON.parse(d));
    expect(submitted).toMatchObject({ created: true, job: { queue: 'images', type: 'resize', state: 'JOB_STATE_PENDING' } });
    expect(listed.jobs.map((j: { id: string }) => j.id)).toContain(submitted.job.id);

    const none = await runTls(tlsStep('no-token'), tlsAddr);
    expect(none.ok).toBe(false);
    expect(none.stderr).toMatch(/Code: Unauthenticated/);
    const wrong = await runTls(tlsStep('token').split('\n')[1]!, tlsAddr, { EVORA_TOKEN: 'evora_wrong-token-0123456789abcdef' });
    expect(wrong.ok).toBe(false);
    expect(wrong.stderr).toMatch(/Code: Unauthenticated/);
    expect(wrong.stderr).not.toContain('evora_wrong-token');
    // Health stays open.
    expect((await runTls(tlsStep('tls'), tlsAddr)).ok).toBe(true);
  });
});
