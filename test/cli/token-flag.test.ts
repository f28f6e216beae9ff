import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobServiceService } from '../../src/gen/evora/v1/job.js';
import { cliSetup } from '../helpers/cli.js';
import { queueName } from '../helpers/factories.js';
import { teardownAdd } from '../helpers/teardown.js';
import { tokenInsert } from '../helpers/tokens.js';

/**
 * The CLI's global --token, --token-file and EVORA_TOKEN (src/cli/client-context.ts): the token goes out
 * as `authorization: Bearer <token>` and is never printed, also not in an error. The first
 * tests run against a small recording server; the last against the live test server with
 * tokens in its table (auth on).
 */

const { evora, evoraEnv, databaseUrl } = cliSetup();

const SECRET = 'evora_cli-test-secret-0123456789abcdef';

/** A JobService whose GetJob records the authorization header and answers UNAUTHENTICATED. */
let recorded: string[] = [];
let recorder: grpc.Server;
let recorderAddress = '';
beforeAll(async () => {
  recorder = new grpc.Server();
  const unimplemented = (_call: unknown, cb: grpc.sendUnaryData<never>) => cb({ code: grpc.status.UNIMPLEMENTED });
  recorder.addService(JobServiceService, {
    submitJob: unimplemented,
    submitJobs: unimplemented,
    getJob: (call: grpc.ServerUnaryCall<unknown, never>, cb: grpc.sendUnaryData<never>) => {
      recorded.push(String(call.metadata.get('authorization')[0] ?? ''));
      cb({ code: grpc.status.UNAUTHENTICATED, details: 'unknown token' });
    },
    listJobs: unimplemented,
    cancelJob: unimplemented,
    retryJob: unimplemented,
    retryJobs: unimplemented,
    purgeJobs: unimplemented,
    listJobAttempts: unimplemented,
  });
  const port = await new Promise<number>((resolve, reject) =>
    recorder.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  recorderAddress = `127.0.0.1:${port}`;
});
afterAll(() => recorder.forceShutdown());

describe('evora --token', () => {
  it('--help lists --token, --token-file and their variables', async () => {
    const r = await evora('--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/--token <token>/);
    expect(r.stdout).toMatch(/--token-file <path>/);
    expect(r.stdout).toMatch(/EVORA_TOKEN\b/);
    expect(r.stdout).toMatch(/EVORA_TOKEN_FILE/);
  });

  it('sends --token, else EVORA_TOKEN, as a bearer token; the flag wins; never printed', async () => {
    recorded = [];
    const flag = await evoraEnv({ EVORA_TOKEN: undefined }, '--address', recorderAddress, '--token', SECRET, 'get', 'j1');
    const env = await evoraEnv({ EVORA_TOKEN: `${SECRET}-env\n` }, '--address', recorderAddress, 'get', 'j1');
    const both = await evoraEnv({ EVORA_TOKEN: 'from-env' }, '--address', recorderAddress, '--token', SECRET, 'get', 'j1');
    const none = await evoraEnv({ EVORA_TOKEN: undefined }, '--address', recorderAddress, 'get', 'j1');
    expect(recorded).toEqual([`Bearer ${SECRET}`, `Bearer ${SECRET}-env`, `Bearer ${SECRET}`, '']);
    for (const r of [flag, env, both, none]) {
      expect(r.code).not.toBe(0);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/^evora: UNAUTHENTICATED: unknown token/);
      expect(`${r.stdout}${r.stderr}`).not.toContain(SECRET);
    }
    // Without a token the one line says how to give one.
    expect(none.stderr).toMatch(/no token given: set EVORA_TOKEN, or pass --token-file or --token/);
    expect(flag.stderr).not.toMatch(/no token given/);
  });

  it('--token-file: the first line of the file is sent, before EVORA_TOKEN; never printed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'evora-token-file-'));
    teardownAdd(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'token');
    writeFileSync(file, `${SECRET}-file\r\nsecond line\n`, { mode: 0o600 });
    recorded = [];
    const r = await evoraEnv({ EVORA_TOKEN: 'from-env', EVORA_TOKEN_FILE: undefined }, '--address', recorderAddress, '--token-file', file, 'get', 'j1');
    expect(recorded).toEqual([`Bearer ${SECRET}-file`]);
    expect(r.stderr).toMatch(/^evora: UNAUTHENTICATED: unknown token\n$/);
    expect(`${r.stdout}${r.stderr}`).not.toContain(SECRET);
  });

  it('a token that cannot be a header value is a usage error that does not echo it', async () => {
    const r = await evoraEnv({ EVORA_TOKEN: undefined }, '--address', recorderAddress, '--token', 'bad token-value', 'get', 'j1');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/--token must be printable ASCII without spaces/);
    expect(r.stderr).not.toContain('token-value');
  });

  // Needs the server side of auth (a server enforcing tokens once its table has one).
  it('against a server with tokens: the right token works, none or a wrong one is UNAUTHENTICATED, a weak role PERMISSION_DENIED', async () => {
    const admin = await tokenInsert(databaseUrl(), { role: 'admin' });
    const viewer = await tokenInsert(databaseUrl(), { role: 'viewer' });
    const queue = queueName();
    const ok = await evoraEnv({ EVORA_TOKEN: admin.secret }, 'submit', queue, 'noop', '--json');
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    const read = await evoraEnv({ EVORA_TOKEN: undefined }, '--token', viewer.secret, 'list', '--queue', queue, '--json');
    expect(read.code).toBe(0);
    expect(JSON.parse(read.stdout)).toHaveLength(1);

    const none = await evoraEnv({ EVORA_TOKEN: undefined }, 'list', '--queue', queue);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toMatch(/^evora: UNAUTHENTICATED: .*no token given/);
    const wrong = await evoraEnv({ EVORA_TOKEN: SECRET }, 'list', '--queue', queue);
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toMatch(/^evora: UNAUTHENTICATED: /);
    expect(wrong.stderr).not.toContain(SECRET);
    const denied = await evoraEnv({ EVORA_TOKEN: viewer.secret }, 'queue', 'pause', queue);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toMatch(/^evora: PERMISSION_DENIED: /);
    for (const r of [ok, read, none, wrong, denied]) expect(`${r.stdout}${r.stderr}`).not.toMatch(new RegExp(`${admin.secret}|${viewer.secret}`));
  });
});
