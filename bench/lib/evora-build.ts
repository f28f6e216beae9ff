/**
 * Evora as it ships: the server and the SDK compiled by tsc into a folder of the run's own,
 * with the statements, migrations and descriptor set next to the modules (what
 * `npm run build` puts in dist/, without the dashboard). The bench measures this build, the
 * JavaScript users run (`evora serve` is `node dist/src/cli/main.js serve`), as it measures
 * every other system's published JavaScript.
 *
 * Must stay true: the bench runs what ships, not the source through tsx. tsx compiles with
 * esbuild's keepNames, which wraps every named closure in a `__name` call each time one is
 * made: `uuidv7()` costs 0.26 µs compiled and 0.64–0.83 µs through tsx (1,000,000 calls).
 * On a whole burn-down the difference is within this machine's noise (docs/benchmarks.md,
 * five interleaved pairs). The harness's own code (bench/, the workers' wrappers) stays
 * TypeScript for every system.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The two entry points the bench runs. */
export interface EvoraBuild {
  /** The folder of the build. */
  dir: string;
  /** `node <serverMain> serve` starts a server. */
  serverMain: string;
  /** URL of the SDK's module (EvoraClient, EvoraWorker), for `import()`. */
  sdkUrl: string;
}

/** What the SDK module exports, typed by its source (the build is compiled from it). */
export type EvoraSdk = typeof import('../../src/sdk/index.js');

/**
 * Compiles the server's CLI and the SDK (about 5 s; type checking is `npm run typecheck`'s
 * job) and copies their run-time files, into a folder under the project's
 * node_modules/.cache (the compiled modules find their packages by walking up to
 * node_modules, so the folder cannot be in /tmp). The caller removes `dir`. Throws with
 * tsc's output when the build fails.
 */
export function evoraBuild(): EvoraBuild {
  const dir = join(ROOT, 'node_modules', '.cache', `evora-bench-build-${process.pid}`);
  const out = join(dir, 'out');
  mkdirSync(dir, { recursive: true });
  const tsconfig = join(dir, 'tsconfig.json');
  writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: join(ROOT, 'tsconfig.build.json'),
      compilerOptions: { outDir: out, rootDir: ROOT, declaration: false, sourceMap: true },
      files: [join(ROOT, 'src/cli/main.ts'), join(ROOT, 'src/sdk/index.ts')],
      include: [],
    }),
  );
  const serverMain = join(out, 'src/cli/main.js');
  const sdkModule = join(out, 'src/sdk/index.js');
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', tsconfig, '--noCheck'], { encoding: 'utf8' });
  if (tsc.status !== 0 || !existsSync(serverMain) || !existsSync(sdkModule)) {
    throw new Error(`building Evora for the bench failed: ${tsc.stdout}${tsc.stderr}`);
  }
  const assets = spawnSync(process.execPath, [join(ROOT, 'scripts/build-assets.mjs'), out], { encoding: 'utf8' });
  if (assets.status !== 0) throw new Error(`copying the build's assets failed: ${assets.stdout}${assets.stderr}`);
  return { dir, serverMain, sdkUrl: pathToFileURL(sdkModule).href };
}

/** The SDK of a build, or of the source when `sdkUrl` is undefined (`--set evora.from=source`). */
export async function evoraSdk(sdkUrl: string | undefined): Promise<EvoraSdk> {
  return sdkUrl ? ((await import(sdkUrl)) as EvoraSdk) : await import('../../src/sdk/index.js');
}
