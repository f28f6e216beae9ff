/**
 * Where the CPU went. How much CPU other processes used while the harness ran: the machine's busy time
 * (/proc/stat) minus the harness's own and that of every child it started and reaped
 * (/proc/self/stat utime + stime + cutime + cstime). Read the second sample after every
 * child has exited. Linux only; null elsewhere. Also the CPU time the hypervisor gave to
 * others while this VM wanted it (steal): on a shared host it moves numbers from run to run.
 * And how much the processes of the system under test used during a burn-down
 * (processCpuUs), so each system's CPU per job can be set side by side.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

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
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
    // After ") ": state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17), 1-based over the whole line.
    const ours = (f[11] ?? 0) + (f[12] ?? 0) + (f[13] ?? 0) + (f[14] ?? 0);
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

/** utime + stime of one /proc/<pid>/stat, and its parent pid; null when the process is gone. */
function statOf(pid: number | string): { ppid: number; ticks: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) };
  } catch {
    return null;
  }
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
  if (parents.size > 0) {
    let pids: string[] = [];
    try {
      pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
    } catch {
      // not Linux
    }
    for (const pid of pids) {
      const s = statOf(pid);
      if (s && parents.has(s.ppid)) ticks += s.ticks;
    }
  }
  return (ticks * 1_000_000) / TICKS_PER_SECOND;
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
