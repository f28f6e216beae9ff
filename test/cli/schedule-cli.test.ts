import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { queueName } from '../helpers/factories.js';
import { cliSetup } from '../helpers/cli.js';

/**
 * `evora schedule ...` (src/cli/schedule-commands.ts), run as the built CLI in a child
 * process against a live server (test/helpers/cli.ts).
 */

const { evora, json } = cliSetup();

type ScheduleJson = { name: string; cron: string; timezone: string; queue: string; paused: boolean; misfirePolicy: string; misfireCap: number; nextRunAt: string; lastJobId: string | null };

describe('evora schedule', () => {
  it('set, get, list, pause, trigger, resume, delete; bad input is one line on stderr', async () => {
    const name = queueName('nightly');
    const queue = queueName();
    const set = await json<{ created: boolean; schedule: ScheduleJson }>(
      'schedule', 'set', name, '0 3 * * *', queue, 'report', '--timezone', 'America/New_York', '--payload', '{"k":1}', '--misfire', 'run-each', '--misfire-cap', '5',
    );
    expect(set.created).toBe(true);
    expect(set.schedule).toMatchObject({ name, cron: '0 3 * * *', timezone: 'America/New_York', queue, paused: false, misfirePolicy: 'run_each', misfireCap: 5 });
    const human = await evora('schedule', 'get', name);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^cron\s+0 3 \* \* \*$/m);
    expect(human.stdout).toMatch(/^misfire\s+run_each \(at most 5\)$/m);
    expect((await json<ScheduleJson[]>('schedule', 'list')).map((s) => s.name)).toContain(name);
    expect((await evora('schedule', 'pause', name)).stdout).toBe(`schedule ${name}: paused\n`);
    // An upsert keeps it paused, and says so rather than a next run that will not come.
    expect((await evora('schedule', 'set', name, '0 3 * * *', queue, 'report', '--timezone', 'America/New_York', '--payload', '{"k":1}', '--misfire', 'run-each', '--misfire-cap', '5')).stdout)
      .toBe(`schedule ${name} updated; paused: no run until \`evora schedule resume\`\n`);
    const trig = await json<{ jobId: string; idempotencyKey: string; created: boolean }>('schedule', 'trigger', name, '--id', 'cli-1');
    expect(trig).toMatchObject({ created: true, idempotencyKey: `schedule:${name}:trigger:cli-1` });
    expect((await evora('schedule', 'trigger', name, '--id', 'cli-1')).stdout).toMatch(/already submitted/);
    expect((await evora('schedule', 'resume', name)).stdout).toMatch(new RegExp(`^schedule ${name}: resumed; next run `));

    // The payload from a file, as --help and docs/sdk.md say (@file), as for submit.
    const dir = mkdtempSync(join(tmpdir(), 'evora-schedule-cli-'));
    try {
      writeFileSync(join(dir, 'payload.json'), '{"from":"file","n":2}');
      const fromFile = await json<{ schedule: ScheduleJson & { payload: unknown } }>('schedule', 'set', name, '0 3 * * *', queue, 'report', '--payload', `@${join(dir, 'payload.json')}`);
      expect(fromFile.schedule.payload).toEqual({ from: 'file', n: 2 });
      const noFile = await evora('schedule', 'set', name, '0 3 * * *', queue, 'report', '--payload', `@${join(dir, 'absent.json')}`);
      expect(noFile.code).toBe(2);
      expect(noFile.stderr).toMatch(/^evora: --payload @.*absent\.json: ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect((await evora('schedule', 'trigger', name, '--id', '')).code).toBe(2);
    expect((await evora('schedule', 'delete', name)).stdout).toBe(`schedule ${name}: deleted\n`);

    const missing = await evora('schedule', 'get', name);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
    expect(missing.stderr).toMatch(/not found/);
    const bad = await evora('schedule', 'set', name, '61 * * * *', queue, 'report');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/cron "61 \* \* \* \*" is invalid/);
  });
});
