/**
 * How long a durable write waits on this machine's disk: writes 8 KiB and calls
 * fdatasync, every 10 ms for SECONDS, in the directory given (default the system's temp
 * directory, where the bench's PostgreSQL keeps its data), and prints p50 / p99 / max and
 * how many took over 20 ms. Every durable commit of PostgreSQL waits on one such flush of
 * its WAL, so a stall here is a stall of every submit (Evora's and graphile-worker's) in the
 * latency scenario: read its p99 next to a run's.
 *
 * Usage: npx tsx bench/experiments/fsync-latency.ts [seconds=10] [dir]
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const seconds = Number(process.argv[2] ?? 10);
const dir = mkdtempSync(join(process.argv[3] ?? tmpdir(), 'evora-fsync-'));
const fd = openSync(join(dir, 'probe'), 'w');
const block = Buffer.alloc(8192, 1);
const ms: number[] = [];
try {
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    writeSync(fd, block);
    const t = performance.now();
    fdatasyncSync(fd);
    ms.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 10));
  }
} finally {
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });
}
ms.sort((a, b) => a - b);
const at = (p: number) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))]!.toFixed(2);
console.log(
  `${ms.length} fdatasyncs of 8 KiB in ${seconds} s: p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${ms[ms.length - 1]!.toFixed(2)} ms, ` +
    `${ms.filter((x) => x > 20).length} over 20 ms`,
);
