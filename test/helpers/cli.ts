import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { serverSetup } from './server-setup.js';

/** The repository's root. */
export const ROOT = resolve(import.meta.dirname, '../..');

/** What one run of the CLI printed, and its exit code. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The `evora` CLI as users run it (plain `node main.js`, as `npx evora` runs it), against a
 * live test server: registers beforeAll/afterAll that start the server and compile the CLI
 * with tsc into a private folder (so the tests neither need nor disturb `npm run build`'s
 * dist/), and remove that folder after. Returns `evora(...args)` (a child process, with
 * EVORA_ADDRESS set to the test server unless --address is given) and `json(...args)` (a
 * command that must succeed with --json, parsed).
 */
export function cliSetup() {
  // Under node_modules so that the compiled files resolve their packages from the project.
  const build = join(ROOT, 'node_modules', '.cache', `evora-cli-test-${randomBytes(4).toString('hex')}`);
  const main = join(build, 'out', 'src', 'cli', 'main.js');
  let address = '';
  let databaseUrl = '';

  beforeAll(async () => {
    ({ address, databaseUrl } = await serverSetup());
    mkdirSync(build, { recursive: true });
    writeFileSync(
      join(build, 'tsconfig.json'),
      JSON.stringify({
        extends: join(ROOT, 'tsconfig.build.json'),
        compilerOptions: { outDir: join(build, 'out'), rootDir: ROOT, declaration: false, sourceMap: false },
        files: [join(ROOT, 'src', 'cli', 'main.ts')],
        include: [],
      }),
    );
    // Type checking is `npm run typecheck`'s job; here only the emitted JavaScript matters.
    const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(build, 'tsconfig.json'), '--noCheck'], {
      encoding: 'utf8',
    });
    if (!existsSync(main)) throw new Error(`building the CLI failed: ${tsc.stdout}${tsc.stderr}`);
    // As `npm run build` does: the statements, migrations and descriptor set go next to the modules.
    const assets = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build-assets.mjs'), join(build, 'out')], { encoding: 'utf8' });
    if (assets.status !== 0) throw new Error(`copying the build's assets failed: ${assets.stdout}${assets.stderr}`);
  });
  afterAll(() => rmSync(build, { recursive: true, force: true }));

  /** Runs `evora <args>` against the test server (through EVORA_ADDRESS unless --address is given). */
  function evora(...args: string[]): Promise<CliRun> {
    return evoraEnv({}, ...args);
  }

  /** As `evora`, with `env` added to (or, with undefined, removed from) the environment. */
  function evoraEnv(env: Record<string, string | undefined>, ...args: string[]): Promise<CliRun> {
    return run(env, false, args);
  }

  /** As `evora`, with its output's reader gone before it writes (`evora … | head -c 0`); stdout is then ''. */
  function evoraStdoutGone(...args: string[]): Promise<CliRun> {
    return run({}, true, args);
  }

  function run(env: Record<string, string | undefined>, stdoutGone: boolean, args: string[]): Promise<CliRun> {
    return new Promise((done, fail) => {
      const child = spawn(process.execPath, [main, ...args], {
        env: { ...process.env, EVORA_ADDRESS: address, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      // Closes this end of the pipe: the child's writes to it then fail EPIPE.
      if (stdoutGone) child.stdout.destroy();
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

  return { evora, evoraEnv, evoraStdoutGone, json, address: () => address, databaseUrl: () => databaseUrl };
}
