// Copies the files the server reads at run time next to its compiled modules: every
// .sql (the store's statements and migrations) and .binpb (the API's descriptor set)
// under src/ goes to the same place under dist/src/ (or under the build folder given as
// the first argument, as tsc's outDir). tsc copies only TypeScript, and
// the modules find these files relative to themselves (import.meta.url), so the build is
// self-contained: nothing is looked up by walking directories. It also marks the
// package's `bin` targets executable: tsc writes them 0644, and npm links the root
// package's own bin (for `npx evora` after `npm install`, whose `prepare` builds) before
// `prepare` has built it, so nothing else would.
import { chmodSync, cpSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const ASSET = /\.(sql|binpb)$/;
const outDir = resolve(process.argv[2] ?? join(root, 'dist'));
let copied = 0;
for (const entry of readdirSync(join(root, 'src'), { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !ASSET.test(entry.name)) continue;
  const from = join(entry.parentPath, entry.name);
  cpSync(from, join(outDir, relative(root, from)));
  copied++;
}
console.log(`build-assets: ${copied} files copied into ${relative(root, outDir) || '.'}/src`);

// Only for the default build folder: a build elsewhere (a test's private build) has no bin.
if (!process.argv[2]) {
  const { bin = {} } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  for (const target of Object.values(typeof bin === 'string' ? { evora: bin } : bin)) {
    const file = join(root, target);
    if (existsSync(file)) chmodSync(file, 0o755);
  }
}
