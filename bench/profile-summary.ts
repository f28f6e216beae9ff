/**
 * Summarizes a V8 CPU profile (from `npm run bench -- --profile DIR`): the share of samples
 * that were idle, in GC, and the top functions by self time, with where they live.
 *
 *   npx tsx bench/profile-summary.ts DIR/evora-server-throughput-*.cpuprofile [top=25]
 */
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: tsx bench/profile-summary.ts <file.cpuprofile> [top]');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);

const where = (url: string) => {
  if (!url) return '(native)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith('node:')) return url;
  const s = /\/(src|bench|test)\/(.+)$/.exec(url);
  return s ? `${s[1]}/${s[2]}` : url;
};

const byFn = new Map<string, number>();
const byModule = new Map<string, number>();
for (const [id, t] of self) {
  const n = byId.get(id)!;
  const fn = n.callFrame.functionName || '(anonymous)';
  const key = `${fn}  ${where(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
  byFn.set(key, (byFn.get(key) ?? 0) + t);
  const mod = ['(idle)', '(garbage collector)', '(program)'].includes(fn) ? fn : where(n.callFrame.url);
  byModule.set(mod, (byModule.get(mod) ?? 0) + t);
}
const pct = (t: number) => `${((t / total) * 100).toFixed(1).padStart(5)}%`;
console.log(`${file}: ${(total / 1e6).toFixed(2)} s sampled`);
console.log('\nby module (self time):');
for (const [k, t] of [...byModule].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${pct(t)}  ${k}`);
console.log(`\ntop ${top} functions (self time):`);
for (const [k, t] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${pct(t)}  ${k}`);
