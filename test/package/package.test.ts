import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { freePort, logLines } from '../helpers/private-pg.js';
import { teardownAdd } from '../helpers/teardown.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Evora as a dependency: the tarball `npm pack` makes of the built repository (dist/, which
 * `npm ci`'s `prepare` builds; after a change to src/, `npm run build` first), and that
 * tarball installed into a project of its own, as a user's `npm install evora` would. What
 * holds in the repository need not hold there:
 * package.json's `overrides` apply to the root project only, and `npm pack` ships every file
 * that no rule leaves out. The install takes its packages from npm's cache
 * (`--prefer-offline`; the registry only for what the cache lacks) and runs no install
 * scripts (nothing here starts the embedded PostgreSQL).
 */

const ROOT = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  bin: Record<string, string>;
  exports: Record<string, string | { types: string; default: string }>;
};

/** npm with the environment of a user's shell: without what `npm test` put there for this project. */
function npm(args: string[], cwd: string): string {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')));
  const run = spawnSync('npm', args, { cwd, env, encoding: 'utf8', timeout: 50_000 });
  if (run.status !== 0) throw new Error(`npm ${args.join(' ')} failed (${run.status ?? run.signal}): ${run.stderr}${run.stdout}`);
  return run.stdout;
}

/** Every file under dir, as paths relative to it. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)));
}

/**
 * The build must be there: the package is dist/ as `npm run build` (or `npm ci`'s `prepare`,
 * as in CI) left it, as in test/sdk/doc-snippets.test.ts. Not compared with src/ by time:
 * CI regenerates src/gen after the build (identical files, newer times).
 */
function distBuilt(): void {
  for (const file of [...Object.values(pkg.bin), 'dist/dashboard/index.html']) {
    if (!existsSync(join(ROOT, file))) throw new Error(`${file} is missing: run npm run build first (the package ships dist/)`);
  }
}

describe('the package', () => {
  let work = '';
  let tarball = '';
  let packed: string[] = [];
  /** The project the tarball is installed into. */
  let app = '';

  beforeAll(() => {
    distBuilt();
    work = mkdtempSync(join(tmpdir(), 'evora-package-'));
    teardownAdd(() => rmSync(work, { recursive: true, force: true }));
    const [report] = JSON.parse(npm(['pack', '--ignore-scripts', '--json', '--pack-destination', work], ROOT)) as { filename: string; files: { path: string }[] }[];
    tarball = join(work, report!.filename);
    packed = report!.files.map((f) => f.path);
    app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }));
    // engine-strict: every package the install brings must take the Node that runs this
    // test (a Node `engines` admits): cookie 2, under Fastify's newest light-my-request, did not.
    npm(['install', '--prefer-offline', '--engine-strict', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error', tarball], app);
  }, 120_000);

  it('ships what `evora serve` and the SDK need: the build, its statements, migrations, descriptor set and dashboard, the .proto files', () => {
    const needed = [
      'package.json',
      'README.md',
      'LICENSE',
      ...Object.values(pkg.bin),
      ...Object.values(pkg.exports).flatMap((e) => (typeof e === 'string' ? [e] : [e.types, e.default])),
      ...filesUnder(join(ROOT, 'src'))
        .filter((f) => /\.(sql|binpb)$/.test(f))
        .map((f) => join('dist', 'src', f)),
      ...filesUnder(join(ROOT, 'dist', 'dashboard')).map((f) => join('dist', 'dashboard', f)),
      ...filesUnder(join(ROOT, 'proto')).map((f) => join('proto', f)),
    ].map((f) => f.replace(/^\.\//, ''));
    expect(needed.filter((f) => !packed.includes(f))).toEqual([]);
    // The source maps name the TypeScript they were built from.
    expect(packed).toContain('src/sdk/client.ts');
  });

  it("ships none of the repository's own files: tests, benchmarks, scripts, examples, CI, tools, the dashboard's sources", () => {
    const own = /^(test|bench|scripts|examples|tools|dashboard|\.ci|\.evora|node_modules)\/|^docs\/screenshots\/|^(vitest\.config\.ts|tsconfig(\.build)?\.json|buf(\.gen)?\.yaml|\.dependency-cruiser\.cjs|docker-compose\.yml)$/;
    expect(packed.filter((f) => own.test(f))).toEqual([]);
  });

  it('installed: `evora --version` prints the package version; `evora` and `evora/client` import, and require() them too', () => {
    const version = spawnSync(join(app, 'node_modules', '.bin', 'evora'), ['--version'], { cwd: app, encoding: 'utf8' });
    expect(version.stdout).toBe(`${pkg.version}\n`);
    const esm = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', "import * as a from 'evora'; import * as b from 'evora/client'; console.log(typeof a.EvoraClient, typeof a.EvoraWorker, a.EvoraClient === b.EvoraClient)"],
      { cwd: app, encoding: 'utf8' },
    );
    expect(esm.stderr).toBe('');
    expect(esm.stdout).toBe('function function true\n');
    // CommonJS: require() of an ES module, which every Node in `engines` does.
    const cjs = spawnSync(process.execPath, ['--input-type=commonjs', '-e', "const e = require('evora'); console.log(typeof e.EvoraClient, typeof e.EvoraWorker)"], {
      cwd: app,
      encoding: 'utf8',
    });
    expect(cjs.stdout).toBe('function function\n');
  });

  it('installed: TypeScript finds the types of `evora` and `evora/client` under moduleResolution node10 (`module: commonjs`\'s default), nodenext and bundler', () => {
    // What a service's own code would write; no top-level await, so that CommonJS output takes it.
    writeFileSync(
      join(app, 'consumer.ts'),
      [
        "import { EvoraClient, EvoraWorker, NonRetryableError, type Job } from 'evora';",
        "import { EvoraClient as Client } from 'evora/client';",
        "const client: EvoraClient = new Client({ address: '127.0.0.1:1' });",
        "const worker = new EvoraWorker({ queues: ['emails'] });",
        "worker.handle<{ to: string }>('send', async (job) => { if (!job.payload.to) throw new NonRetryableError('no address'); return { sent: true }; });",
        'export const jobs: Job[] = [];',
        'client.close();',
      ].join('\n'),
    );
    const settings: [string, ts.ModuleResolutionKind, ts.ModuleKind][] = [
      ['node10', ts.ModuleResolutionKind.Node10, ts.ModuleKind.CommonJS],
      ['nodenext', ts.ModuleResolutionKind.NodeNext, ts.ModuleKind.NodeNext],
      ['bundler', ts.ModuleResolutionKind.Bundler, ts.ModuleKind.ESNext],
    ];
    // The three programs parse the same files: once. The declarations themselves are not
    // checked (skipLibCheck): what differs between the settings is how imports resolve.
    const parsed = new Map<string, ts.SourceFile | undefined>();
    const errors = settings.flatMap(([name, moduleResolution, module]) => {
      const options: ts.CompilerOptions = {
        noEmit: true,
        strict: true,
        skipLibCheck: true,
        target: ts.ScriptTarget.ES2022,
        module,
        moduleResolution,
        // The app installed no @types/node of its own: this repository's.
        typeRoots: [join(ROOT, 'node_modules', '@types')],
        types: ['node'],
      };
      const host = ts.createCompilerHost(options);
      const read = host.getSourceFile.bind(host);
      host.getSourceFile = (file, version, ...rest) => {
        const key = `${file}\0${JSON.stringify(version)}`;
        if (!parsed.has(key)) parsed.set(key, read(file, version, ...rest));
        return parsed.get(key);
      };
      const program = ts.createProgram([join(app, 'consumer.ts')], options, host);
      return ts.getPreEmitDiagnostics(program).map((d) => `${name}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
    });
    expect(errors).toEqual([]);
  });

  /**
   * `evora serve` from the installed package, on a PostgreSQL that is not there: it logs and
   * waits for it. Killed (SIGKILL) at the file's end if still running.
   */
  async function serveWaiting() {
    const nothing = `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres`;
    const child = spawn(process.execPath, [join(app, 'node_modules', 'evora', pkg.bin.evora!), 'serve', '--port', '0', '--http-port', '0'], {
      cwd: app,
      env: { ...process.env, DATABASE_URL: nothing, EVORA_LOG_PRETTY: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    teardownAdd(() => child.kill('SIGKILL'));
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | string | null>((done) => child.once('exit', (code, signal) => done(code ?? signal)));
    await waitFor(() => output.includes('waiting for the database'), { timeoutMs: 30_000, what: 'the waiting line' });
    return { child, exited, output: () => output };
  }

  it('installed: `evora serve` stops on SIGTERM even when whatever read its log has gone (EPIPE)', async () => {
    // As test/server/db-outage.test.ts's test of the same name, but from the installed
    // package, where package.json's `overrides` do not reach: pino's sonic-boom there is
    // the 4 pino asks for, whose exit flush of a write failing EPIPE was retried for ever.
    const { child, exited } = await serveWaiting();
    child.stdout.destroy();
    child.stderr.destroy();
    child.kill('SIGTERM');
    const hung = new Promise<'hung'>((done) => setTimeout(() => done('hung'), 15_000).unref());
    expect(await Promise.race([exited, hung])).toBe(0);
  });

  it("installed: every line `evora serve` logs names the package's version", async () => {
    const { child, exited, output } = await serveWaiting();
    child.kill('SIGTERM');
    await exited;
    const lines = logLines(output());
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.filter((l) => l.version !== pkg.version)).toEqual([]);
  });
});
