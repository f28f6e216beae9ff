import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';

/**
 * `evora schedule ...` (src/cli/schedule-commands.ts), run as the built CLI in a child
 * process against a live server, built as test/cli/cli.test.ts builds it.
 */

const ROOT = resolve(import.meta.dirname, '../..');
// Under node_modules so that the compiled files resolve their packages from the project.
const BUILD = join(ROOT, 'node_modules', '.cache', `evora-cli-test-${randomBytes(4).toString('hex')}`);
const MAIN = join(BUILD, 'out', 'src', 'cli', 'main.js');
let address: string;

beforeAll(async () => {
  ({ address } = await serverSetup());
  mkdirSync(BUILD, { recursive: true });
  writeFileSync(
    join(BUILD, 'tsconfig.json'),
    JSON.stringify({
      extends: join(ROOT, 'tsconfig.build.json'),
      compilerOptions: { outDir: join(BUILD, 'out'), rootDir: ROOT, declaration: false, sourceMap: false },
      files: [join(ROOT, 'src', 'cli', 'main.ts')],
      include: [],
    }),
  );
  // Type checking is `npm run typecheck`'s job; here only the emitted JavaScript matters.
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(BUILD, 'tsconfig.json'), '--noCheck'], {
    encoding: 'utf8',
  });
  if (!existsSync(MAIN)) throw new Error(`building the CLI failed: ${tsc.stdout}${tsc.stderr}`);
  // As `npm run build` does: the statements, migrations and descriptor set go next to the modules.
  const assets = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build-assets.mjs'), join(BUILD, 'out')], { encoding: 'utf8' });
  if (assets.status !== 0) throw new Error(`copying the build's assets failed: ${assets.stdout}${assets.stderr}`);
});
afterAll(() => rmSync(BUILD, { recursive: true, force: true }));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `evora <args>` against the test server (through EVORA_ADDRESS unless --address is given). */
function evora(...args: string[]): Promise<Run> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { ...process.env, EVORA_ADDRESS: address },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

/** Runs a command that must succeed with --json and returns its parsed output. */
async function json<T = Record<string, unknown>>(...args: string[]): Promise<T> {
  const r = await evora(...args, '--json');
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as T;
}

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
    const trig = await json<{ jobId: string; idempotencyKey: string; created: boolean }>('schedule', 'trigger', name, '--id', 'cli-1');
    expect(trig).toMatchObject({ created: true, idempotencyKey: `schedule:${name}:trigger:cli-1` });
    expect((await evora('schedule', 'trigger', name, '--id', 'cli-1')).stdout).toMatch(/already submitted/);
    expect((await evora('schedule', 'resume', name)).stdout).toMatch(new RegExp(`^schedule ${name}: resumed; next run `));
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
