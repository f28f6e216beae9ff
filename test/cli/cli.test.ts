import { readFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { testDatabaseCreate } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';
import { freePort } from '../../src/server/embedded-postgres.js';
import { queueName } from '../helpers/factories.js';
import { cliSetup, ROOT, type CliRun } from '../helpers/cli.js';
import { teardownAdd } from '../helpers/teardown.js';
import { pino } from 'pino';
import { configLoad } from '../../src/server/config.js';
import { serverStart } from '../../src/server/server.js';

/**
 * The `evora` client commands, run as the built CLI (plain `node main.js`, as `npx evora`
 * runs it) in a child process against a live server. The CLI is compiled with tsc into a
 * private folder, so the test neither needs nor disturbs `npm run build`'s dist/.
 */

const { evora, evoraEnv, evoraStdoutGone, json } = cliSetup();

type JobJson = { id: string; state: string; queue: string; type: string; payload: unknown; priority: number; maxAttempts: number; runAt: string; idempotencyKey: string | null };

/** A failed run's one line on stderr (nothing on stdout). */
function oneLineError(r: CliRun): string {
  expect(r.stdout).toBe('');
  expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
  return r.stderr.trimEnd();
}

/**
 * A TCP port that accepts connections and never answers: a database host that is frozen, or
 * behind a firewall that swallows the handshake. Closed after the file.
 */
async function silentPort(): Promise<number> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  teardownAdd(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return (server.address() as { port: number }).port;
}

/**
 * A real Evora server whose database never answers (a closed port): bound, it answers every
 * call UNAVAILABLE "the server is starting: waiting for the database". Stopped after the file.
 */
async function startingServer(): Promise<string> {
  const config = configLoad({ host: '127.0.0.1', port: '0', httpPort: '0', databaseUrl: `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres` }, {});
  const stop = new AbortController();
  let address = '';
  const started = serverStart(config, pino({ level: 'silent' }), { signal: stop.signal, onListening: (a) => (address = a) }).catch(() => undefined);
  teardownAdd(async () => {
    stop.abort();
    await started;
  });
  await waitFor(() => address, { what: 'the starting server to listen' });
  return address;
}

describe('evora client commands', () => {
  it('submit, get, list, cancel and retry a job', async () => {
    const queue = queueName();
    const runAt = Date.now() + 3_600_000;
    const sub = await json<{ created: boolean; job: JobJson }>(
      'submit', queue, 'send_email', '--payload', '{"to":"a@example.com","n":2}', '--key', 'k-1', '--priority', '-3', '--run-at', '1h', '--max-attempts', '4',
    );
    expect(sub.created).toBe(true);
    expect(sub.job).toMatchObject({ queue, type: 'send_email', state: 'PENDING', payload: { to: 'a@example.com', n: 2 }, priority: -3, maxAttempts: 4, idempotencyKey: 'k-1' });
    expect(Math.abs(Date.parse(sub.job.runAt) - runAt)).toBeLessThan(60_000);
    const id = sub.job.id;

    const replay = await evora('submit', queue, 'send_email', '--payload', '{"to":"a@example.com","n":2}', '--key', 'k-1', '--priority', '-3', '--run-at', sub.job.runAt, '--max-attempts', '4');
    expect(replay).toMatchObject({ code: 0, stderr: '' });
    expect(replay.stdout).toMatch(new RegExp(`job ${id} already exists`));

    const human = await evora('submit', queue, 'other');
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^job [0-9a-f-]{36} submitted to queue .* \(type other, PENDING\)\n$/);

    expect(await json<JobJson>('get', id)).toMatchObject({ id, state: 'PENDING', payload: { to: 'a@example.com', n: 2 }, attempts: [], progress: null });
    const shown = await evora('get', id);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^id\\s+${id}$`, 'm'));
    expect(shown.stdout).toMatch(/^state\s+PENDING$/m);
    expect(shown.stdout).toMatch(/^progress\s+-$/m);
    expect(shown.stdout).toMatch(/^attempts: none yet$/m);
    // jsonb orders keys its own way.
    expect(shown.stdout).toMatch(/^payload\s+\{("n":2,"to":"a@example.com"|"to":"a@example.com","n":2)\}$/m);

    const listed = await json<JobJson[]>('list', '--queue', queue);
    expect(listed).toHaveLength(2);
    expect(await json<JobJson[]>('list', '--queue', queue, '--type', 'send_email', '--state', 'pending', '--state', 'running')).toHaveLength(1);
    expect(await json<JobJson[]>('list', '--queue', queue, '--state', 'DLQ,cancelled')).toEqual([]);
    const table = await evora('list', '--queue', queue, '--limit', '1');
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+QUEUE\s+TYPE\s+STATE\s+ATTEMPT/);
    expect(table.stdout).toMatch(/showing the newest 1/);

    expect(await json<JobJson>('cancel', id)).toMatchObject({ id, state: 'CANCELLED' });
    const retried = await evora('retry', id);
    expect(retried).toMatchObject({ code: 0, stdout: `job ${id}: PENDING, will run again\n` });
    // Retrying a PENDING job is a conflict with its state.
    const again = await evora('retry', id);
    expect(again.code).toBe(4);
    expect(again.stderr).toMatch(new RegExp(`^evora: FAILED_PRECONDITION: job ${id} is PENDING; only DLQ or CANCELLED jobs can be retried\\n$`));
  });

  it('retry --all, cancel --all and purge over a filter: dry runs, counts, --json, and the guards against a typo', async () => {
    const queue = queueName('bulk');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await json<{ job: JobJson }>('submit', queue, 't')).job.id);
    for (const id of ids) await json('cancel', id);

    // Without an id, a filter retry needs --all; an id and filter flags together are refused.
    const noAll = await evora('retry', '--queue', queue, '--state', 'cancelled');
    expect(noAll.code).toBe(2);
    expect(noAll.stderr).toMatch(/^evora: give a job id, or filter flags .* with --all\n$/);
    const both = await evora('retry', ids[0]!, '--all', '--queue', queue);
    expect(both.code).toBe(2);
    // --state takes one value (comma-separated, or repeated): a word after it is a positional, never a state.
    const positionals: [string[], RegExp][] = [
      [['retry', '--state', 'cancelled', ids[0]!], /^evora: give a job id, or filter flags with --all, not both$/],
      [['retry', '--all', '--queue', queue, '--state', 'dlq', 'cancelled'], /^evora: "cancelled" is read as the job id: give several states comma-separated \(--state dlq,cancelled\) or repeat --state$/],
      [['list', '--queue', queue, '--state', 'dlq', 'cancelled'], /^evora: too many arguments for 'list'\. .*\(--state takes several states comma-separated, --state dlq,pending, or repeated\)$/],
    ];
    for (const [i, r] of (await Promise.all(positionals.map(([args]) => evora(...args)))).entries()) {
      expect(r.code, positionals[i]![0].join(' ')).toBe(2);
      expect(oneLineError(r)).toMatch(positionals[i]![1]);
    }
    const empty = await evora('retry', '--all');
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/^evora: INVALID_ARGUMENT: a filter is required/);
    const wrongState = await evora('purge', '--queue', queue, '--state', 'pending');
    expect(wrongState.code).toBe(2);
    expect(wrongState.stderr).toMatch(/PENDING jobs cannot be purged/);

    expect(await json('retry', '--all', '--queue', queue, '--state', 'cancelled', '--dry-run')).toEqual({ count: 3, finishedBefore: expect.stringMatching(/^\d{4}-.*Z$/), dryRun: true });
    const retried = await evora('retry', '--all', '--queue', queue, '--state', 'cancelled');
    expect(retried).toMatchObject({ code: 0, stdout: '3 jobs retried\n' });
    expect(await json<JobJson[]>('list', '--queue', queue, '--state', 'pending')).toHaveLength(3);
    expect(await json('retry', '--all', '--queue', queue)).toEqual({ count: 0, dryRun: false });

    // Cancelled again, all at once: purged once telemetry has recorded their events (the count waits for it).
    const cancelNoAll = await evora('cancel', '--queue', queue);
    expect(cancelNoAll.code).toBe(2);
    expect(cancelNoAll.stderr).toMatch(/^evora: give a job id, or filter flags \(--queue, --state, --type, --error-group\) with --all\n$/);
    expect((await evora('cancel', '--all', '--queue', queue, '--finished-before', '1h')).code).toBe(2);
    expect(await json('cancel', '--all', '--queue', queue, '--dry-run')).toEqual({ count: 3, dryRun: true });
    expect(await evora('cancel', '--all', '--queue', queue)).toMatchObject({ code: 0, stdout: '3 jobs cancelled or asked to stop\n' });
    expect(await json<JobJson[]>('list', '--queue', queue, '--state', 'cancelled')).toHaveLength(3);
    expect(await json('purge', '--queue', queue, '--finished-before', '1h', '--dry-run')).toEqual({ count: 0, finishedBefore: null, dryRun: true });
    await waitFor(async () => (await json<{ count: number }>('purge', '--queue', queue, '--state', 'cancelled', '--dry-run')).count === 3, {
      what: 'three jobs to purge',
    });
    const purged = await evora('purge', '--queue', queue, '--state', 'cancelled', '--finished-before', new Date(Date.now() + 60_000).toISOString());
    expect(purged).toMatchObject({ code: 0, stdout: '3 jobs deleted\n' });
    expect(await json<JobJson[]>('list', '--queue', queue)).toEqual([]);
    expect(await evora('purge', '--queue', queue, '--dry-run')).toMatchObject({ code: 0, stdout: '0 jobs would be deleted\n' });
    const badTime = await evora('purge', '--queue', queue, '--finished-before', 'last week');
    expect(badTime.code).toBe(2);
    expect(badTime.stderr).toMatch(/^evora: --finished-before must be an age such as 7d or an ISO 8601 time/);
  });

  it('submit --depends-on makes a WAITING job; get shows its parents, and a parent its children', async () => {
    const queue = queueName();
    const a = (await json<{ job: JobJson }>('submit', queue, 'a')).job.id;
    const b = (await json<{ job: JobJson }>('submit', queue, 'b')).job.id;
    const child = await json<{ job: JobJson & { dependsOn: string[] } }>('submit', queue, 'c', '--depends-on', `${a},${b}`);
    expect(child.job).toMatchObject({ state: 'WAITING' });
    expect([...child.job.dependsOn].sort()).toEqual([a, b].sort());
    const shown = await evora('get', child.job.id);
    expect(shown.stdout).toMatch(/^state\s+WAITING$/m);
    expect(shown.stdout).toMatch(new RegExp(`^depends on\\s+(${a}, ${b}|${b}, ${a})$`, 'm'));
    expect(shown.stdout).toMatch(/^children\s+-$/m);
    const second = (await json<{ job: JobJson }>('submit', queue, 'c', '--depends-on', a)).job.id;
    expect((await evora('get', a)).stdout).toMatch(new RegExp(`^children\\s+${child.job.id}, ${second}$`, 'm'));
    expect(await json<{ dependents: string[] }>('get', a)).toMatchObject({ dependents: [child.job.id, second] });
    expect(await json<JobJson[]>('list', '--queue', queue, '--state', 'waiting')).toHaveLength(2);
    // The flag repeated: every use counts (the last alone used to, and the job waited for b only).
    const both = (await json<{ job: JobJson & { dependsOn: string[] } }>('submit', queue, 'c', '--depends-on', a, '--depends-on', b)).job;
    expect([...both.dependsOn].sort()).toEqual([a, b].sort());
    const bad = await evora('submit', queue, 'c', '--depends-on', '01900000-0000-7000-8000-000000000002');
    expect(bad.code).toBe(3);
  });

  it('queues, queue set / get / pause / resume', async () => {
    const name = queueName();
    const created = await json<{ created: boolean; queue: Record<string, unknown> }>(
      'queue', 'set', name, '--max-attempts', '3', '--lease-seconds', '15', '--backoff', 'fixed', '--backoff-base', '2s', '--backoff-cap', '1h', '--jitter', '0', '--max-concurrency', '5',
      '--completed-retention', '2d', '--dlq-retention', 'forever',
    );
    expect(created).toEqual({
      created: true,
      queue: expect.objectContaining({
        name,
        maxAttempts: 3,
        leaseSeconds: 15,
        maxConcurrency: 5,
        paused: false,
        backoff: { kind: 'fixed', baseSeconds: 2, capSeconds: 3600, jitter: 0 },
        completedRetentionSeconds: 172_800,
        cancelledRetentionSeconds: 604_800,
        dlqRetentionSeconds: 0,
      }),
    });
    expect(created.queue.attemptTimeoutSeconds).toBe(0);
    const updated = await evora('queue', 'set', name, '--max-attempts', '6', '--cancelled-retention', '12h', '--attempt-timeout', '5m');
    expect(updated.code).toBe(0);
    expect(updated.stdout).toMatch(new RegExp(`^queue ${name} updated\\n`));
    expect(updated.stdout).toMatch(/^max attempts\s+6$/m);
    expect(updated.stdout).toMatch(/^backoff\s+fixed 2s\.\.1h$/m);
    expect(updated.stdout).toMatch(/^keep completed\s+2d$/m);
    expect(updated.stdout).toMatch(/^keep cancelled\s+12h$/m);
    expect(updated.stdout).toMatch(/^keep dlq\s+forever$/m);
    expect(updated.stdout).toMatch(/^attempt timeout\s+5m$/m);
    expect(updated.stdout).toMatch(/^rate limit\s+none$/m);
    const limited = await evora('queue', 'set', name, '--rate', '5/s', '--burst', '1');
    expect(limited.stdout).toMatch(/^rate limit\s+5\/s, burst 1$/m);
    expect(await json('queue', 'get', name)).toMatchObject({ rateLimit: { perSecond: 5, burst: 1 } });
    expect((await evora('queue', 'set', name, '--rate', '120/m')).stdout).toMatch(/^rate limit\s+2\/s, burst 2$/m);
    expect((await evora('queue', 'set', name, '--rate', 'none')).stdout).toMatch(/^rate limit\s+none$/m);
    expect((await evora('queue', 'set', name, '--max-concurrency-per-key', '2')).stdout).toMatch(/^max per key\s+2$/m);
    expect(await json('queue', 'get', name)).toMatchObject({ maxConcurrencyPerKey: 2 });
    expect(await evora('queue', 'set', name, '--burst', '2')).toMatchObject({ code: 2, stderr: 'evora: --burst needs --rate\n' });
    expect(await evora('queue', 'set', name, '--rate', 'none', '--burst', '2')).toMatchObject({ code: 2, stderr: 'evora: --burst has no meaning with --rate 0 or none (they clear the limit)\n' });
    expect((await evora('queue', 'set', name, '--rate', 'fast')).code).toBe(2);

    expect(await evora('queue', 'pause', name)).toMatchObject({ code: 0, stdout: `queue ${name}: paused\n` });
    expect(await json('queue', 'get', name)).toMatchObject({ name, paused: true, maxAttempts: 6 });
    const queues = await json<{ name: string; paused: boolean }[]>('queues');
    expect(queues.find((q) => q.name === name)).toMatchObject({ paused: true });
    const table = await evora('queues');
    expect(table.stdout.split('\n')[0]).toMatch(/^NAME\s+STATUS\s+MAX ATTEMPTS\s+LEASE\s+BACKOFF\s+MAX CONCURRENCY\s+KEEP COMPLETED\/CANCELLED\/DLQ$/);
    expect(table.stdout).toMatch(new RegExp(`^${name}\\s+paused\\s+6\\s+15s\\s+fixed 2s\\.\\.1h\\s+5\\s+2d/12h/forever$`, 'm'));
    expect(await json('queue', 'resume', name)).toMatchObject({ name, paused: false });

    const deleting = await evora('queue', 'set', name, '--delete-on-complete');
    expect(deleting.stdout).toMatch(/^keep completed\s+no: deleted at completion \(those with dependents: 2d\)$/m);
    expect(await json('queue', 'get', name)).toMatchObject({ deleteOnComplete: true, completedRetentionSeconds: 172_800 });
    expect((await evora('queues')).stdout).toMatch(new RegExp(`^${name}\\s+active\\s.*\\sdeleted/12h/forever$`, 'm'));
    expect((await evora('queue', 'set', name, '--no-delete-on-complete')).stdout).toMatch(/^keep completed\s+2d$/m);
    expect(await json('queue', 'get', name)).toMatchObject({ deleteOnComplete: false });
  });

  it('queue delete: an empty queue goes (exit 0), one with a job is refused with what is in it (exit 4), an unknown one is 3', async () => {
    const name = queueName('cdel');
    expect((await evora('submit', name, 't')).code).toBe(0);
    const refused = await evora('queue', 'delete', name);
    expect(refused.code).toBe(4);
    expect(refused.stderr).toMatch(new RegExp(`queue "${name}" is not empty: it has 1 job \\(1 PENDING\\).*evora cancel --all --queue ${name}`));
    const empty = queueName('cdel');
    expect((await evora('queue', 'set', empty, '--max-attempts', '3')).code).toBe(0);
    expect(await evora('queue', 'delete', empty)).toMatchObject({ code: 0, stdout: `queue ${empty}: deleted\n` });
    expect((await evora('queue', 'get', empty)).code).toBe(3);
    expect((await evora('queue', 'delete', empty)).code).toBe(3);
  });

  it('exit codes and one-line errors: 2 usage/invalid, 3 not found, 4 conflict, 5 unavailable', async () => {
    const queue = queueName();
    const missing = '00000000-0000-4000-8000-000000000000';
    const unreachable = `127.0.0.1:${await freePort()}`;
    const silent = `127.0.0.1:${await silentPort()}`;
    const starting = await startingServer();
    const secret = 'evora-cli-test-secret-never-printed-0123456789';
    const [notFound, badJson, notObject, badFlag, badState, badName, badTime, noQueue, down, downJson, noPort, late, lateSubmit, latePause, lateRevoke, noDatabase] = await Promise.all([
      evora('get', missing),
      evora('submit', queue, 't', '--payload', '{"to":'),
      evora('submit', queue, 't', '--payload', '[1,2]'),
      evora('list', '--colour'),
      evora('list', '--state', 'finished'),
      evora('submit', 'not a queue', 't'),
      evora('submit', queue, 't', '--run-at', 'tomorrowish'),
      evora('queue', 'pause', 'no_such_queue'),
      evora('--address', unreachable, 'queues'),
      evora('queues', '--json', '--address', unreachable),
      // A host without a port is dialled at Evora's 50051, not grpc-js's 443 (.invalid never resolves).
      evora('--address', 'evora-test.invalid', '--timeout', '3s', 'queues'),
      // A server that accepts the connection and never answers: the deadline passes.
      evora('--address', silent, '--timeout', '1s', 'queues'),
      evora('--address', silent, '--timeout', '0.5', 'submit', queue, 't'),
      evora('--address', silent, '--timeout', '0.5', '--token', secret, 'queue', 'pause', queue),
      // Through the server, not directly on a database.
      evoraEnv({ DATABASE_URL: undefined }, '--address', silent, '--timeout', '0.5', 'token', 'revoke', 'ci-bot'),
      // A server that is reached and answers UNAVAILABLE itself (its database is away).
      evora('--address', starting, 'queues'),
    ]);
    const oneLine = (r: CliRun) => {
      expect(r.stdout).toBe('');
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
      return r.stderr.trimEnd();
    };
    expect(notFound.code).toBe(3);
    expect(oneLine(notFound)).toBe(`evora: NOT_FOUND: job ${missing} not found`);
    expect(badJson.code).toBe(2);
    expect(oneLine(badJson)).toMatch(/^evora: --payload is not valid JSON: /);
    expect(notObject.code).toBe(2);
    expect(oneLine(notObject)).toBe('evora: --payload must be a JSON object');
    expect(badFlag.code).toBe(2);
    expect(oneLine(badFlag)).toBe("evora: unknown option '--colour'");
    expect(badState.code).toBe(2);
    expect(oneLine(badState)).toMatch(/^evora: --state: unknown job state "finished"/);
    expect(badName.code).toBe(2);
    expect(oneLine(badName)).toMatch(/^evora: INVALID_ARGUMENT: queue "not a queue" may contain only/);
    expect(badTime.code).toBe(2);
    expect(oneLine(badTime)).toMatch(/^evora: --run-at must be/);
    expect(noQueue.code).toBe(3);
    expect(oneLine(noQueue)).toBe('evora: NOT_FOUND: queue "no_such_queue" not found');
    expect(down.code).toBe(5);
    expect(oneLine(down)).toMatch(new RegExp(`^evora: UNAVAILABLE: cannot reach the Evora server at ${unreachable}`));
    expect(downJson.code).toBe(5);
    // Not "cannot reach": the server answered (before, the same words as for a refused connection).
    expect(noDatabase.code).toBe(5);
    expect(oneLine(noDatabase)).toBe(`evora: UNAVAILABLE: the Evora server at ${starting} answered: the server is starting: waiting for the database`);
    expect(noPort.code).toBe(5);
    expect(oneLine(noPort)).toMatch(/ the Evora server at evora-test\.invalid:50051\b/);
    expect(late.code).toBe(5);
    expect(oneLine(late)).toBe(
      `evora: DEADLINE_EXCEEDED: ListQueues got no answer from the Evora server at ${silent} within 1s (raise --timeout if the server is busy, or check that it is up and reachable)`,
    );
    expect(lateSubmit.code).toBe(5);
    // A submit's line keeps the SDK's word on whether the job went out.
    expect(oneLine(lateSubmit)).toMatch(new RegExp(`^evora: DEADLINE_EXCEEDED: SubmitJob got no answer from the Evora server at ${silent} within 0\\.5s \\(raise --timeout .*\\); the job (may have been|was not) submitted$`));
    // Another write's line claims neither outcome, and names the command that tells (its argument from the command line),
    // with the connection flags given, so that it asks the same server; never the --token value.
    expect(latePause.code).toBe(5);
    expect(oneLine(latePause)).toMatch(
      new RegExp(`^evora: DEADLINE_EXCEEDED: PauseQueue got no answer .*; the pause may or may not have been applied: check with evora --address ${silent} queue get ${queue}, with your token in EVORA_TOKEN .*: the --token given is not printed$`),
    );
    expect(latePause.stderr).not.toContain(secret);
    expect(lateRevoke.code).toBe(5);
    expect(oneLine(lateRevoke)).toMatch(/; the revoke of token ci-bot may or may not have been applied: check with evora --address \S+ token list --all \(its REVOKED column for ci-bot\)$/);

    // An idempotency key reused with different content is a conflict.
    expect((await evora('submit', queue, 't', '--key', 'dup', '--payload', '{"a":1}')).code).toBe(0);
    const conflict = await evora('submit', queue, 't', '--key', 'dup', '--payload', '{"a":2}');
    expect(conflict.code).toBe(4);
    expect(oneLine(conflict)).toMatch(/^evora: ALREADY_EXISTS: /);
    // The job's own backoff and timeout reach the server: a replay must repeat them.
    const policy = ['--backoff', 'fixed', '--backoff-base', '1s', '--attempt-timeout', '30s'];
    expect((await evora('submit', queue, 't', '--key', 'pol', ...policy)).code).toBe(0);
    expect((await evora('submit', queue, 't', '--key', 'pol', ...policy)).code).toBe(0);
    expect(oneLine(await evora('submit', queue, 't', '--key', 'pol', ...policy.slice(0, 4), '--attempt-timeout', '31s'))).toMatch(/different timeout$/);
    expect(oneLine(await evora('submit', queue, 't', '--key', 'pol', '--attempt-timeout', '30s'))).toMatch(/different backoff$/);
    expect(oneLine(await evora('submit', queue, 't', '--attempt-timeout', '0s'))).toBe('evora: INVALID_ARGUMENT: timeout must be positive, got 0 s');
    // Nothing was submitted by the failed commands.
    expect(await json<unknown[]>('list', '--queue', queue)).toHaveLength(2);
    // The concurrency key reaches the server and is compared on a replay.
    const keyed = await json<{ job: { id: string; concurrencyKey: string } }>('submit', queue, 't', '--key', 'ck', '--concurrency-key', 'tenant-1');
    expect(keyed.job.concurrencyKey).toBe('tenant-1');
    expect(oneLine(await evora('submit', queue, 't', '--key', 'ck', '--concurrency-key', 'tenant-2'))).toMatch(/different concurrency_key$/);
  });

  it('stats: one queue in detail and all queues as a table, once the projector has caught up', async () => {
    const queue = queueName('stats');
    await json('submit', queue, 'noop');
    const stats = await waitFor(async () => {
      const s = await json<{ counts: Record<string, number>; submitted60m: number }>('stats', queue);
      return s.counts.PENDING === 1 ? s : null;
    }, { what: 'stats to show the job' });
    expect(stats?.submitted60m).toBe(1);
    const human = await evora('stats', queue);
    expect(human.stdout).toMatch(/pending \/ running\s+1 \/ 0/);
    const table = await evora('stats');
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^QUEUE\s+PENDING\s+RUNNING\s+COMPLETED\s+DLQ/);
    expect(table.stdout).toContain(queue);
    expect((await evora('stats', 'no-such-queue')).code).toBe(3);
  });

  it('migrate applies the migrations to an empty database once; a database a newer Evora migrated: migrate and serve exit 6', async () => {
    const db = await testDatabaseCreate({ empty: true });
    const client = new pg.Client({ connectionString: db.url });
    try {
      const url = db.url;
      const first = await json<{ applied: number[] }>('migrate', '--database-url', url);
      // The baseline and whatever came after it, in order.
      expect(first.applied[0]).toBe(1);
      expect(first.applied).toEqual([...first.applied].sort((a, b) => a - b));
      expect(await json('migrate', '--database-url', url)).toEqual({ applied: [] });
      expect((await evora('migrate', '--database-url', url)).stdout).toMatch(/up to date/);
      // Migrated by a newer Evora: starting again cannot help, and exit 6 says so to a
      // supervisor (systemd RestartPreventExitStatus=6), for migrate and serve alike.
      await client.connect();
      await client.query(`INSERT INTO evora.schema_migrations (version, name) VALUES (9001, 'from_the_future')`);
      const [migrated, served] = await Promise.all([
        evora('migrate', '--database-url', url),
        evora('serve', '--database-url', url, '--port', '0', '--http-port', '0'),
      ]);
      const refusal = /^evora: the database was migrated by a newer Evora \(it records 9001_from_the_future; /;
      expect(migrated.code).toBe(6);
      expect(oneLineError(migrated)).toMatch(refusal);
      // serve logs to stdout; its stderr is the one line.
      expect(served.code).toBe(6);
      expect(served.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(served.stderr).toMatch(refusal);
    } finally {
      await client.end();
      await db.drop();
    }
  });

  it('--run-at and --finished-before take an ISO 8601 time with its zone; none, or a day that does not exist, is refused and changes nothing', async () => {
    const queue = queueName();
    // In another zone than the server's, so that a time read in the machine's zone would show.
    const inNewYork = (...args: string[]) => evoraEnv({ TZ: 'America/New_York' }, ...args);
    const [noZone, noDay, notIso, purgeNoZone] = await Promise.all([
      inNewYork('submit', queue, 't', '--run-at', '2030-01-01T10:00'),
      inNewYork('submit', queue, 't', '--run-at', '2030-02-30T10:00:00Z'),
      inNewYork('submit', queue, 't', '--run-at', '1/2/2030'),
      inNewYork('purge', '--queue', queue, '--finished-before', '2030-01-01 10:00', '--dry-run'),
    ]);
    expect(noZone.code).toBe(2);
    expect(oneLineError(noZone)).toBe('evora: --run-at "2030-01-01T10:00" has no zone: add Z for UTC, or an offset such as +02:00');
    expect(noDay.code).toBe(2);
    expect(oneLineError(noDay)).toBe('evora: --run-at "2030-02-30T10:00:00Z" is not a valid date and time');
    expect(notIso.code).toBe(2);
    expect(oneLineError(notIso)).toMatch(/^evora: --run-at must be an ISO 8601 time/);
    expect(purgeNoZone.code).toBe(2);
    expect(oneLineError(purgeNoZone)).toMatch(/^evora: --finished-before "2030-01-01 10:00" has no zone/);
    expect(await json<JobJson[]>('list', '--queue', queue)).toEqual([]);

    // An offset, the form the CLI prints (a space, Z) and a date alone (its midnight UTC).
    const runAt = async (time: string) => (await json<{ job: JobJson }>('submit', queue, 't', '--run-at', time)).job.runAt;
    expect(await runAt('2030-01-01T10:00:00+02:00')).toBe('2030-01-01T08:00:00.000Z');
    expect(await runAt('2030-01-01 10:00:00Z')).toBe('2030-01-01T10:00:00.000Z');
    const day = await inNewYork('submit', queue, 't', '--run-at', '2030-01-01', '--json');
    expect(day.code).toBe(0);
    expect((JSON.parse(day.stdout) as { job: JobJson }).job.runAt).toBe('2030-01-01T00:00:00.000Z');
  });

  it('a flag that names something, given an empty value (an unset variable), is refused: no purge of every queue, no job without its key or parents', async () => {
    const queue = queueName();
    const other = queueName();
    const mine = (await json<{ job: JobJson }>('submit', queue, 't')).job.id;
    const theirs = (await json<{ job: JobJson }>('submit', other, 't')).job.id;
    await json('cancel', mine);
    await json('cancel', theirs);
    const runs = await Promise.all([
      evora('purge', '--queue', '', '--state', 'cancelled'),
      evora('retry', '--all', '--queue', '', '--state', 'cancelled'),
      evora('purge', '--queue', queue, '--state', ''),
      evora('list', '--type', ' '),
      evora('submit', queue, 't', '--key', ''),
      evora('submit', queue, 't', '--concurrency-key', ''),
      evora('submit', queue, 't', '--depends-on', ' , '),
    ]);
    const expected = ['--queue is empty', '--queue is empty', '--state names no state', '--type is empty', '--key is empty', '--concurrency-key is empty', '--depends-on names no job id'];
    for (const [i, r] of runs.entries()) {
      expect(r.code, expected[i]).toBe(2);
      expect(oneLineError(r)).toMatch(new RegExp(`^evora: ${expected[i]}: .*leave the flag out$`));
    }
    // Nothing changed: both jobs are still there and CANCELLED, and no job was submitted.
    expect(await json<JobJson>('get', mine)).toMatchObject({ state: 'CANCELLED' });
    expect(await json<JobJson>('get', theirs)).toMatchObject({ state: 'CANCELLED' });
    expect(await json<JobJson[]>('list', '--queue', queue)).toHaveLength(1);
  });

  it('--timeout 0 is bad usage (exit 2), not an unreachable server', async () => {
    const zero = await evora('--timeout', '0', 'queues');
    expect(zero.code).toBe(2);
    expect(oneLineError(zero)).toBe('evora: --timeout must be more than 0, got "0"');
  });

  it('migrate and db create-role: a database refusing or never answering exits 5 with one line (the connect is bounded); a malformed setting exits 2', async () => {
    const refused = `postgres://evora:x@127.0.0.1:${await freePort()}/postgres`;
    const silent = `postgres://evora:x@127.0.0.1:${await silentPort()}/postgres`;
    const [migrateRefused, migrateSilent, roleRefused, badPort, migrateEmpty, roleEmpty] = await Promise.all([
      evora('migrate', '--database-url', refused),
      evora('migrate', '--database-url', silent),
      evora('db', 'create-role', '--database-url', refused),
      evora('migrate', '--embedded-pg-port', 'abc'),
      // `--database-url "$URL"` with the variable unset: it migrated a new embedded PostgreSQL.
      evora('migrate', '--database-url', ''),
      evora('db', 'create-role', '--database-url', ''),
    ]);
    expect(migrateEmpty.code).toBe(2);
    expect(oneLineError(migrateEmpty)).toMatch(/^evora: --database-url was given an empty value: give a PostgreSQL URL, or leave the flag out/);
    expect(roleEmpty.code).toBe(2);
    expect(oneLineError(roleEmpty)).toMatch(/^evora: --database-url was given an empty value: /);
    expect(migrateRefused.code).toBe(5);
    expect(oneLineError(migrateRefused)).toMatch(/^evora: UNAVAILABLE: database unavailable: connection refused \(127\.0\.0\.1:\d+\)$/);
    expect(migrateSilent.code).toBe(5);
    expect(oneLineError(migrateSilent)).toMatch(/^evora: UNAVAILABLE: database unavailable: /);
    expect(roleRefused.code).toBe(5);
    expect(oneLineError(roleRefused)).toMatch(/^evora: UNAVAILABLE: database unavailable: connection refused/);
    expect(badPort.code).toBe(2);
    expect(oneLineError(badPort)).toBe('evora: EVORA_PG_PORT (--embedded-pg-port) must be a whole number, got "abc"');
  });

  it('serve: an unknown log level or log-pretty value exits 2 with the setting\'s line, before anything starts', async () => {
    // A database that cannot be reached, so that nothing could start if the check were missed.
    const nowhere = ['--database-url', `postgres://evora:x@127.0.0.1:${await freePort()}/postgres`, '--port', '0', '--http-port', '0'];
    const [level, pretty] = await Promise.all([evora('serve', ...nowhere, '--log-level', 'loud'), evora('serve', ...nowhere, '--log-pretty', 'maybe')]);
    expect(level.code).toBe(2);
    expect(oneLineError(level)).toBe('evora: EVORA_LOG_LEVEL (--log-level) must be one of trace, debug, info, warn, error, fatal, silent, got "loud"');
    expect(pretty.code).toBe(2);
    expect(oneLineError(pretty)).toBe('evora: EVORA_LOG_PRETTY (--log-pretty) must be 0 or 1 (or unset), got "maybe"');
  });

  it('output whose reader has gone (evora … | head -c 0) is dropped: the command runs to its end, exit 0, no stack trace', async () => {
    const queue = queueName('piped');
    const [submit, help] = await Promise.all([evoraStdoutGone('submit', queue, 't'), evoraStdoutGone('--help')]);
    expect([submit.code, submit.stderr]).toEqual([0, '']);
    expect([help.code, help.stderr]).toEqual([0, '']);
    const list = await evoraStdoutGone('list', '--queue', queue);
    expect([list.code, list.stderr]).toEqual([0, '']);
    expect(await json<unknown[]>('list', '--queue', queue)).toHaveLength(1);
  });

  it('--help exits 0', async () => {
    const help = await evora('--help');
    expect(help.code).toBe(0);
    for (const cmd of ['serve', 'submit', 'get', 'list', 'cancel', 'retry', 'queues', 'queue']) expect(help.stdout).toContain(cmd);
  });

  it("every subcommand's help lists the global options too; `help <command>` exits 0, a missing command 2", async () => {
    const cmds = [['serve'], ['migrate'], ['submit'], ['get'], ['list'], ['cancel'], ['retry'], ['queues'], ['stats'], ['queue'], ['queue', 'set'], ['queue', 'pause']];
    const helps = await Promise.all(cmds.map((c) => evora(...c, '--help')));
    for (const [i, h] of helps.entries()) {
      const what = `evora ${cmds[i]!.join(' ')} --help`;
      expect(h.code, what).toBe(0);
      expect(h.stdout, what).toMatch(/^Global Options:$/m);
      for (const flag of ['--address <host:port>', '--json', '--timeout <duration>', '--version']) expect(h.stdout, what).toContain(flag);
    }
    const viaHelp = await evora('help', 'list');
    expect(viaHelp.code).toBe(0);
    expect(viaHelp.stdout).toContain('--limit <n>');
    // Every state a job can be listed in, WAITING (for its parents) too.
    expect(viaHelp.stdout.replace(/\s+/g, ' ')).toContain('(waiting, pending, running, completed, dlq, cancelled;');
    expect((await evora('queue')).code).toBe(2);
    // A name `help` does not know is one usage line, not the whole help (at any depth).
    const [unknown, unknownSub, sub] = await Promise.all([evora('help', 'nosuch'), evora('queue', 'help', 'nope'), evora('queue', 'help', 'set')]);
    expect([unknown.code, unknown.stderr, unknown.stdout]).toEqual([2, "evora: unknown command 'nosuch'\n", '']);
    expect([unknownSub.code, unknownSub.stderr]).toEqual([2, "evora: unknown command 'nope'\n"]);
    expect(sub.code).toBe(0);
    expect(sub.stdout).toContain('--max-concurrency');
  });

  it('--version and -V print the version of package.json', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const r = await evora(flag);
      expect(r.code, flag).toBe(0);
      expect(r.stdout, flag).toBe(`${version}\n`);
    }
  });

  it('range errors name the flag and the bound that exists: "at least 1", never "to Infinity", never the SDK\'s field', async () => {
    const [limit, attempts, jitter, priority, rate] = await Promise.all([
      evora('list', '--limit', '0'),
      evora('queue', 'set', queueName(), '--max-attempts', '0'),
      evora('queue', 'set', queueName(), '--jitter', '2'),
      evora('submit', queueName(), 't', '--priority', '99999999999'),
      // The default burst (a second of the rate) would be past an int32 too.
      evora('queue', 'set', queueName(), '--rate', '1e10/s'),
    ]);
    expect(limit.code).toBe(2);
    expect(limit.stderr).toBe('evora: --limit must be at least 1, got 0\n');
    expect(attempts.stderr).toBe('evora: --max-attempts must be from 1 to 1000, got 0\n');
    expect(jitter.stderr).toBe('evora: --jitter must be from 0 to 1, got 2\n');
    expect(priority).toMatchObject({ code: 2, stderr: 'evora: --priority must be from -1000 to 1000, got 99999999999\n' });
    expect(rate).toMatchObject({ code: 2, stderr: 'evora: --rate must be at most 1000000/s, got "1e10/s"\n' });
  });
});
