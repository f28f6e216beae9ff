import { spawnSync } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker, type EvoraWorkerOptions } from '../../src/sdk/index.js';
import { cliSetup, type CliRun } from '../helpers/cli.js';
import { deadLettersMake } from '../helpers/dead-letters.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { tokenInsert } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';

/**
 * `evora workers`, `evora dlq` (and the `--error-group` of `retry --all` and `purge` its
 * commands use, and of `list`) and `evora whoami`, run as the built CLI against live servers: workers are
 * real EvoraWorkers, dead letters real jobs their worker failed non-retryably
 * (deadLettersMake), and auth is turned on on a second server (a database of its own) to show
 * a token limited to queues seeing only its queues.
 */

const { evora, json, address } = cliSetup();
let client: EvoraClient;
const workers: EvoraWorker[] = [];
const clients: EvoraClient[] = [];

beforeAll(() => {
  client = new EvoraClient({ address: address() });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0, graceMs: 1_000 })));
});
afterAll(() => {
  client.close();
  for (const c of clients.splice(0)) c.close();
});

function worker(opts: Partial<EvoraWorkerOptions> & { queues: string[] }): EvoraWorker {
  const w = new EvoraWorker({ address: address(), ...opts });
  workers.push(w);
  return w;
}

/** A failed run's one line on stderr (nothing on stdout). */
function oneLineError(r: CliRun): string {
  expect(r.stdout).toBe('');
  expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
  return r.stderr.trimEnd();
}

/** The words a POSIX shell makes of `line`, as a program it runs receives them. */
function shellWords(line: string): string[] {
  const r = spawnSync('sh', ['-c', `exec "$0" -e 'process.stdout.write(JSON.stringify(process.argv.slice(1)))' ${line}`, process.execPath], { encoding: 'utf8' });
  expect(r.status).toBe(0);
  return JSON.parse(r.stdout) as string[];
}

/** The `evora <verb>` commands `evora dlq` printed (retry, list), each as the arguments of `evora` a shell passes. */
function printedCommands(stdout: string, verb = 'retry'): string[][] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith(`  evora ${verb} `))
    .map((l) => shellWords(l.trim().slice('evora '.length)));
}

type WorkerJson = { workerId: string; sessionId: string; serverAddress: string; queues: string[]; jobTypes: string[]; slots: number; heldJobs: number; connectedAt: string; lastSeenAt: string };
type GroupsJson = { groups: { queue: string; type: string; error: string; count: number; newestFinishedAt: string }[]; truncated: boolean; totalGroups: number };

describe('evora workers', () => {
  it('a table of the connected workers (held/slots, session, server), --queue, --json; none says so', async () => {
    const queue = queueName('cw');
    expect(await evora('workers', '--queue', queue)).toMatchObject({ code: 0, stdout: `no workers take jobs from queue ${queue}\n`, stderr: '' });

    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const busy = worker({ workerId: `busy-${queue}`, queues: [queue], slots: 3 });
    busy.handle('resize', async () => {
      await released;
      return {};
    });
    const other = queueName('cw-other');
    const idle = worker({ workerId: `idle-${other}`, queues: [other], slots: 2 });
    idle.handle('x', async () => ({}));
    await Promise.all([busy.start(), idle.start()]);
    await client.submit({ queue, type: 'resize' });

    const listed = (await waitFor(
      async () => {
        const all = await json<WorkerJson[]>('workers', '--queue', queue);
        return all.length === 1 && all[0]!.heldJobs === 1 ? all : null;
      },
      { what: 'the busy worker recorded holding its job', timeoutMs: 15_000 },
    ))!;
    expect(listed[0]).toMatchObject({ workerId: busy.workerId, queues: [queue], jobTypes: ['resize'], slots: 3, heldJobs: 1, serverAddress: address() });
    expect(listed[0]!.sessionId).toBe(busy.stats().sessionId);
    expect(Date.parse(listed[0]!.connectedAt)).toBeLessThanOrEqual(Date.parse(listed[0]!.lastSeenAt));

    const human = await evora('workers');
    expect(human).toMatchObject({ code: 0, stderr: '' });
    const lines = human.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^WORKER\s+SESSION\s+QUEUES\s+TYPES\s+HELD\/SLOTS\s+CONNECTED\s+LAST SEEN\s+SERVER$/);
    const busyRow = lines.find((l) => l.startsWith(`${busy.workerId} `))!.split(/\s{2,}/);
    expect(busyRow).toEqual([busy.workerId, listed[0]!.sessionId.slice(0, 8), queue, 'resize', '1/3', expect.stringMatching(/Z$/), expect.stringMatching(/Z$/), address()]);
    const idleRow = lines.find((l) => l.startsWith(`${idle.workerId} `))!.split(/\s{2,}/);
    expect(idleRow.slice(2, 5)).toEqual([other, 'x', '0/2']);
    release();

    const empty = await evora('workers', '--queue', '');
    expect(empty.code).toBe(2);
    expect(oneLineError(empty)).toBe('evora: --queue is empty: give a value, or leave the flag out');
  });
});

describe('evora dlq', () => {
  it('groups by type and error, largest first, each with the commands that retry exactly it and list its jobs; retry --all, purge and list take --error-group', async () => {
    const queue = queueName('cdlq');
    const failing = { on: true };
    const w = worker({ workerId: `dlq-${queue}`, queues: [queue] });
    // A first line with every character a shell would read: the printed command must carry it exactly.
    const nasty = `can't reach "$BANK" \`now\` & retry; *`;
    const errors = ['card declined', 'card declined', 'card declined', `${nasty}\n  at charge (bank.ts:12)`, nasty, ''];
    const ids = await deadLettersMake(client, w, { queue, type: 'charge', errors, failing });

    const res = await json<GroupsJson>('dlq', queue);
    expect(res).toMatchObject({ truncated: false, totalGroups: 3 });
    expect(res.groups.map((g) => [g.queue, g.type, g.error, g.count])).toEqual([
      [queue, 'charge', 'card declined', 3],
      [queue, 'charge', nasty, 2],
      [queue, 'charge', '', 1],
    ]);
    expect(res.groups.every((g) => !Number.isNaN(Date.parse(g.newestFinishedAt)))).toBe(true);

    const human = await evora('dlq', queue);
    expect(human).toMatchObject({ code: 0, stderr: '' });
    const lines = human.stdout.split('\n');
    expect(lines[0]).toMatch(/^QUEUE\s+TYPE\s+COUNT\s+NEWEST\s+ERROR$/);
    expect(lines[1]!.split(/\s{2,}/)).toEqual([queue, 'charge', '3', expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/), 'card declined']);
    expect(lines[2]!.split(/\s{2,}/).slice(2)).toEqual(['2', expect.stringMatching(/Z$/), nasty]);
    expect(lines[3]!.split(/\s{2,}/).slice(2)).toEqual(['1', expect.stringMatching(/Z$/), '(no error)']);
    expect(human.stdout).toContain('retry a group (add --dry-run to count it first; purge takes the same flags):');
    // Re-driving a big group at once can stampede a downstream that just recovered: the lever is named where it is needed.
    expect(human.stdout).toMatch(
      new RegExp(`^\\(retried jobs start as fast as workers take them; to re-drive gradually, limit the queue's starts first: evora( --\\S+ \\S+)* queue set ${queue} --rate 10/s, and --rate none once drained\\)$`, 'm'),
    );

    // Each printed command, as a shell reads it, names its group exactly: its dry run counts that group.
    const commands = printedCommands(human.stdout);
    expect(commands).toEqual(
      res.groups.map((g) => ['retry', '--all', '--queue', queue, '--type', 'charge', '--state', 'dlq', '--error-group', g.error]),
    );
    for (const [i, args] of commands.entries()) {
      expect(await json(...args, '--dry-run')).toEqual({ count: res.groups[i]!.count, finishedBefore: expect.stringMatching(/Z$/), dryRun: true });
    }
    // Purge takes the same filter (it counts a job once telemetry has recorded its events).
    await waitFor(async () => (await json<{ count: number }>('purge', '--queue', queue, '--state', 'dlq', '--error-group', 'card declined', '--dry-run')).count === 3, {
      what: 'the group of 3 to purge',
    });
    expect(await json('purge', '--queue', queue, '--error-group', 'no such error', '--dry-run')).toEqual({ count: 0, finishedBefore: null, dryRun: true });

    // The printed list commands (`list --error-group`) list each group's jobs, filtered by the
    // server; "" is the group of the job without an error. --limit 1: one of the group's,
    // not the newest job left out. Not in --json, which has only the groups.
    expect(human.stdout).toContain("list a group's jobs (newest first; add --limit for more than 50):");
    expect(JSON.stringify(res)).not.toContain('evora ');
    const lists = printedCommands(human.stdout, 'list');
    expect(lists).toEqual(res.groups.map((g) => ['list', '--queue', queue, '--type', 'charge', '--state', 'dlq', '--error-group', g.error]));
    const listedBy = async (args: string[]) => (await json<{ id: string }[]>(...args)).map((j) => j.id).sort();
    expect(await Promise.all(lists.map(listedBy))).toEqual([ids.slice(0, 3).sort(), ids.slice(3, 5).sort(), [ids[5]]]);
    expect(await listedBy([...lists[1]!, '--limit', '1'])).toHaveLength(1);
    const listTwoLines = await evora('list', '--queue', queue, '--error-group', 'a\nb');
    expect(listTwoLines.code).toBe(2);
    expect(oneLineError(listTwoLines)).toMatch(/^evora: INVALID_ARGUMENT: error_group is more than one line/);

    // Retrying one group takes only it: they run again (now succeeding) and leave the DLQ.
    failing.on = false;
    expect(await evora(...commands[1]!)).toMatchObject({ code: 0, stdout: '2 jobs retried\n', stderr: '' });
    await waitFor(async () => (await json<GroupsJson>('dlq', queue)).groups.length === 2, { what: 'the retried group to leave the DLQ' });
    expect((await json<GroupsJson>('dlq', queue)).groups.map((g) => [g.error, g.count])).toEqual([
      ['card declined', 3],
      ['', 1],
    ]);

    // --limit keeps the largest and says what it left out.
    const one = await evora('dlq', queue, '--limit', '1');
    expect(one.stdout).toContain('(the largest 1 of 2 groups; raise --limit, at most 200, to see more)');
    expect(printedCommands(one.stdout)).toHaveLength(1);
    // Every queue: this one's groups among them.
    expect((await json<GroupsJson>('dlq', '--limit', '200')).groups.filter((g) => g.queue === queue)).toHaveLength(2);
    expect(await evora('dlq', queueName('clean'))).toMatchObject({ code: 0, stdout: expect.stringMatching(/^no dead letters in queue clean_\w+\n$/) });

    // Bad input: one line, exit 2, nothing done.
    const limit = await evora('dlq', queue, '--limit', '0');
    expect(limit.code).toBe(2);
    expect(oneLineError(limit)).toBe('evora: --limit must be from 1 to 200, got 0');
    const empty = await evora('dlq', '');
    expect(empty.code).toBe(2);
    expect(oneLineError(empty)).toBe('evora: the queue is empty: name one, or leave it out for every queue');
    const twoLines = await evora('retry', '--all', '--queue', queue, '--error-group', 'a\nb');
    expect(twoLines.code).toBe(2);
    expect(oneLineError(twoLines)).toMatch(/^evora: INVALID_ARGUMENT: .*error_group/);
    const withId = await evora('retry', '00000000-0000-4000-8000-000000000000', '--error-group', 'x');
    expect(withId.code).toBe(2);
    expect(oneLineError(withId)).toBe('evora: give a job id, or filter flags with --all, not both');
    expect((await json<GroupsJson>('dlq', queue)).groups.map((g) => g.count)).toEqual([3, 1]);
  });
});

describe('evora whoami', () => {
  it('auth off: anonymous, every method allowed; a token given is said to be unchecked', async () => {
    expect(await json('whoami')).toEqual({ authOn: false, kind: 'anonymous', name: null, role: 'admin', queues: [], tokenId: null, expiresAt: null });
    const human = await evora('whoami');
    expect(human).toMatchObject({ code: 0, stderr: '' });
    expect(human.stdout).toMatch(/^auth\s+off: no token exists, every caller is anonymous and may call every method$/m);
    expect(human.stdout).toMatch(/^caller\s+anonymous$/m);
    expect(human.stdout).toMatch(/^role\s+admin$/m);
    const withToken = await evora('whoami', '--token', 'evora_not_checked');
    expect(withToken.stdout).toMatch(/^caller\s+anonymous \(the token given is not checked while auth is off\)$/m);
  });

  it("auth on: the token's name, role, queues and expiry; none is UNAUTHENTICATED; a token limited to queues sees only their workers and dead letters", async () => {
    const other = await serverSetup();
    const expiresAt = new Date(Date.now() + 30 * 86_400_000);
    const admin = await tokenInsert(other.databaseUrl, { role: 'admin', name: 'ops-admin' });
    const viewer = await tokenInsert(other.databaseUrl, { role: 'viewer', name: 'billing-viewer', queues: ['billing.*'], expiresAt });
    const at = (token?: string) => ['--address', other.address, ...(token ? ['--token', token] : [])];
    await waitFor(async () => (await evora(...at(), 'whoami')).code === 1, { what: 'auth on' });

    const anonymous = await evora(...at(), 'whoami');
    expect(oneLineError(anonymous)).toMatch(/^evora: UNAUTHENTICATED: .*\(no token given: set EVORA_TOKEN, or pass --token-file or --token\)$/);
    const me = await json<{ expiresAt: string }>(...at(viewer.secret), 'whoami');
    expect(me).toEqual({ authOn: true, kind: 'token', name: 'billing-viewer', role: 'viewer', queues: ['billing.*'], tokenId: viewer.id, expiresAt: expiresAt.toISOString() });
    const human = await evora(...at(viewer.secret), 'whoami');
    expect(human).toMatchObject({ code: 0, stderr: '' });
    expect(human.stdout.trimEnd().split('\n').map((l) => l.split(/\s{2,}/))).toEqual([
      ['auth', 'on'],
      ['caller', 'token billing-viewer'],
      ['token id', viewer.id],
      ['role', 'viewer'],
      ['queues', 'billing.*'],
      ['expires', expiresAt.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z')],
    ]);
    expect((await evora(...at(admin.secret), 'whoami')).stdout).toMatch(/^queues\s+\* \(every queue\)\n[\s\S]*^expires\s+never$/m);

    // Workers (admin token) in the viewer's queues and outside them, each leaving a dead letter.
    const asAdmin = new EvoraClient({ address: other.address, token: admin.secret });
    clients.push(asAdmin);
    const onWorker = (workerId: string, queue: string) => worker({ address: other.address, token: admin.secret, workerId, queues: [queue], slots: 1 });
    await deadLettersMake(asAdmin, onWorker('in-scope', 'billing.invoices'), { queue: 'billing.invoices', type: 'render', errors: ['template missing'] });
    await deadLettersMake(asAdmin, onWorker('out-of-scope', 'shipping.labels'), { queue: 'shipping.labels', type: 'print', errors: ['printer offline'] });

    await waitFor(async () => (await json<WorkerJson[]>(...at(admin.secret), 'workers')).length === 2, { what: 'both workers recorded' });
    expect((await json<WorkerJson[]>(...at(viewer.secret), 'workers')).map((w) => [w.workerId, w.queues])).toEqual([['in-scope', ['billing.invoices']]]);
    const table = (await evora(...at(viewer.secret), 'workers')).stdout;
    expect(table).toContain('in-scope');
    expect(table).not.toContain('out-of-scope');
    expect(table).not.toContain('shipping.labels');

    const groups = await json<GroupsJson>(...at(viewer.secret), 'dlq', 'billing.invoices');
    expect(groups.groups.map((g) => [g.queue, g.type, g.error, g.count])).toEqual([['billing.invoices', 'render', 'template missing', 1]]);
    // The printed commands repeat --address (they must reach this server, not EVORA_ADDRESS's), never the --token value.
    const printed = (await evora(...at(viewer.secret), 'dlq', 'billing.invoices')).stdout;
    expect(printed).toContain(`\n  evora --address ${other.address} retry --all --queue billing.invoices --type render --state dlq --error-group 'template missing'\n`);
    expect(printed).toContain(`\n  evora --address ${other.address} list --queue billing.invoices `);
    expect(printed).toMatch(/\n\(run them with your token in EVORA_TOKEN or --token-file <path>: the --token given is not printed\)\n$/);
    expect(printed).not.toContain(viewer.secret);
    const everyQueue = await evora(...at(viewer.secret), 'dlq');
    expect(everyQueue.code).toBe(1);
    expect(oneLineError(everyQueue)).toMatch(/^evora: PERMISSION_DENIED: /);
    const outside = await evora(...at(viewer.secret), 'dlq', 'shipping.labels');
    expect(outside.code).toBe(1);
    expect(oneLineError(outside)).toMatch(/^evora: PERMISSION_DENIED: .*shipping\.labels/);
  });
});
