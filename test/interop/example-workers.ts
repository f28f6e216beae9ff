import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT, findGo, findPython, start, type Proc, type Tool } from './toolchain.js';

/**
 * The Go and Python example workers as the interop tests start them: how each is built (once
 * per file, into that file's scratch folder), started with a queue and flags, and its own
 * unit tests run. One place, so that both interop files start the workers the same way.
 */

const exec = promisify(execFile);
const GO_DIR = join(REPO_ROOT, 'examples', 'go-worker');
const PY_DIR = join(REPO_ROOT, 'examples', 'python-worker');

/** How to start a worker: the server, the queue it serves and its flags. */
export interface LaunchOptions {
  /** The server's address (host:port). */
  address: string;
  /** Unset: no queue flag, so the worker serves its default queue. */
  queue?: string;
  workerId: string;
  slots: number;
  maxJobs?: number;
  /** The worker's -drain-timeout / --drain-timeout (e.g. "20s"); unset = its default. */
  drainTimeout?: string;
  /** Extra flags, spelled `--x` (Go's flag package takes two dashes too): the TLS files. */
  extra?: string[];
  /** Extra environment (EVORA_TOKEN, EVORA_TOKEN_FILE). */
  env?: Record<string, string>;
  /** How long the process may run before it is killed (default 60 s). */
  timeoutMs?: number;
}

/** One example worker: the tools it needs, how to build and start it, and its unit tests. */
export interface WorkerKind {
  name: string;
  tools: Tool[];
  /** Builds what is needed (once, into `scratch`) and returns how to start the worker. */
  prepare(scratch: string): Promise<(opts: LaunchOptions) => Proc>;
  /** Runs the worker's own unit tests. */
  unitTests(): Promise<void>;
}

/** The flags every worker takes, in the spelling of `dash` ('-' for Go, '--' for Python). */
function flags(dash: string, o: LaunchOptions): string[] {
  return [
    ...[`${dash}address`, o.address, ...(o.queue ? [`${dash}queue`, o.queue] : []), `${dash}worker-id`, o.workerId, `${dash}slots`, String(o.slots)],
    ...(o.maxJobs ? [`${dash}max-jobs`, String(o.maxJobs)] : []),
    ...(o.drainTimeout ? [`${dash}drain-timeout`, o.drainTimeout] : []),
    ...(o.extra ?? []),
  ];
}

/** The Go and Python example workers (each skipped by the caller when its tools are missing). */
export function exampleWorkerKinds(): WorkerKind[] {
  const go = findGo();
  const python = findPython();
  return [
    {
      name: 'Go worker (examples/go-worker)',
      tools: [go],
      async prepare(scratch) {
        if (!go.ok) throw new Error('unreachable');
        const bin = join(scratch, 'go-worker');
        await exec(go.path, ['build', '-o', bin, '.'], { cwd: GO_DIR, timeout: 300_000 });
        return (o) => start(bin, flags('-', o), { timeoutMs: o.timeoutMs ?? 60_000, env: { EVORA_TOKEN: '', EVORA_TOKEN_FILE: '', ...o.env } });
      },
      async unitTests() {
        if (!go.ok) throw new Error('unreachable');
        await exec(go.path, ['test', '.'], { cwd: GO_DIR, timeout: 300_000 });
      },
    },
    {
      name: 'Python worker (examples/python-worker)',
      tools: [python],
      async prepare() {
        if (!python.ok) throw new Error('unreachable');
        const py = python.path;
        return (o) =>
          start(py, ['worker.py', ...flags('--', o)], {
            cwd: PY_DIR,
            timeoutMs: o.timeoutMs ?? 60_000,
            env: { PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1', EVORA_TOKEN: '', EVORA_TOKEN_FILE: '', ...o.env },
          });
      },
      async unitTests() {
        if (!python.ok) throw new Error('unreachable');
        await exec(python.path, ['-m', 'unittest', '-q'], { cwd: PY_DIR, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
      },
    },
  ];
}
