// Copies the files the server reads at run time next to its compiled modules: every
// .sql (the store's statements and migrations) and .binpb (the API's descriptor set)
// under src/ goes to the same place under dist/src/ (or under the build folder given as
// the first argument, as tsc's outDir). tsc copies only TypeScript, and
// the modules find these files relative to themselves (import.meta.url), so the build is
// self-contained: nothing is looked up by walking directories.
import { cpSync, readdirSync } from 'node:fs';
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
