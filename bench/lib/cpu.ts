/**
 * Where the CPU went, from /proc (Linux only; null or 0 elsewhere):
 * - how much other processes used while the harness ran: the machine's busy time
 *   (/proc/stat) minus the harness's own and that of every child it started and reaped
 *   (/proc/self/stat utime + stime + cutime + cstime); read the second sample after every
 *   child has exited; and the CPU time the hypervisor gave to others while this VM wanted it
 *   (steal), which on a shared host moves numbers from run to run;
 * - how much the processes of the system under test used during a burn-down
 *   (processCpuUs), so each system's CPU per job can be set side by side.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/**
 * The fields of /proc/<pid>/stat after the command name (which may hold spaces), as
 * numbers: ppid at STAT_PPID, utime and stime (ticks) at STAT_UTIME and STAT_STIME, the
 * reaped children's cutime and cstime right after. Null when the process is gone.
 */
function statFields(pid: number | string): number[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
  } catch {
    return null;
  }
}
const STAT_PPID = 1;
const STAT_UTIME = 11;
const STAT_STIME = 12;

export interface CpuSample {
  machineBusy: number;
  ours: number;
  steal: number;
  at: number;
}

export function cpuSample(): CpuSample | null {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal ...
    const machineBusy = (cpu[0] ?? 0) + (cpu[1] ?? 0) + (cpu[2] ?? 0) + (cpu[5] ?? 0) + (cpu[6] ?? 0);
    const f = statFields('self');
    if (!f) return null;
    const ours = f[STAT_UTIME]! + f[STAT_STIME]! + f[STAT_UTIME + 2]! + f[STAT_STIME + 2]!; // + cutime, cstime
    return { machineBusy, ours, steal: cpu[7] ?? 0, at: Date.now() };
  } catch {
    return null;
  }
}

/** What other processes used between two samples. */
export interface OtherCpu {
  /** Core-seconds of other processes in this machine. */
  coreSeconds: number;
  /** The same as a share of the machine's time. */
  share: number;
  /** The share of the machine's time the hypervisor gave elsewhere (steal). */
  stealShare: number;
}

/** Core-seconds other processes used between two samples, as a share of the machine, and steal. */
export function otherCpu(a: CpuSample | null, b: CpuSample | null, cores: number): OtherCpu | null {
  if (!a || !b) return null;
  const other = Math.max(0, b.machineBusy - a.machineBusy - (b.ours - a.ours)) / TICKS_PER_SECOND;
  const steal = Math.max(0, b.steal - a.steal) / TICKS_PER_SECOND;
  const wall = (b.at - a.at) / 1000;
  return { coreSeconds: other, share: wall > 0 ? other / (wall * cores) : 0, stealShare: wall > 0 ? steal / (wall * cores) : 0 };
}

/** A process whose CPU time a burn-down accounts for; `children`: its direct children too. */
export interface CpuProcess {
  pid: number;
  children?: boolean;
}

/** utime + stime of one process and its parent pid; null when the process is gone. */
function statOf(pid: number | string): { ppid: number; ticks: number } | null {
  const f = statFields(pid);
  return f ? { ppid: f[STAT_PPID]!, ticks: f[STAT_UTIME]! + f[STAT_STIME]! } : null;
}

/**
 * CPU time (µs) these processes have used so far, each with its direct children when asked
 * (PostgreSQL: the postmaster and its backends, WAL writer, checkpointer, autovacuum). Linux
 * only (0 elsewhere). A child that exits between two samples takes its time with it: the
 * difference of two samples is a lower bound, exact for processes that live through both.
 */
export function processCpuUs(procs: readonly CpuProcess[]): number {
  let ticks = 0;
  for (const p of procs) ticks += statOf(p.pid)?.ticks ?? 0;
  const parents = new Set(procs.filter((p) => p.children).map((p) => p.pid));
  if (parents.size > 0) for (const child of childrenOf(parents)) ticks += child.ticks;
  return (ticks * 1_000_000) / TICKS_PER_SECOND;
}

/** Every process whose parent is in `parents`, with its CPU ticks so far (none off Linux). */
function* childrenOf(parents: ReadonlySet<number>): Generator<{ pid: number; ticks: number }> {
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return; // not Linux
  }
  for (const pid of pids) {
    const s = statOf(pid);
    if (s && parents.has(s.ppid)) yield { pid: Number(pid), ticks: s.ticks };
  }
}

/** The postmaster's pid of the cluster in `dataDir` (first line of postmaster.pid); null if unknown. */
export function postmasterPid(dataDir: string): number | null {
  try {
    const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * CPU ticks so far of each direct child of `parentPid` (PostgreSQL's backends, WAL writer,
 * checkpointer, autovacuum workers), keyed by pid, with its process title: two samples say
 * which of them a burn-down's PostgreSQL time went to. Linux only (empty elsewhere).
 */
export function childCpuByPid(parentPid: number): Map<number, { title: string; us: number }> {
  const out = new Map<number, { title: string; us: number }>();
  for (const { pid, ticks } of childrenOf(new Set([parentPid]))) {
    try {
      const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      out.set(pid, { title, us: (ticks * 1_000_000) / TICKS_PER_SECOND });
    } catch {
      // gone since
    }
  }
  return out;
}
