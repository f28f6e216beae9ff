import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Finding the toolchains the interop tests need (grpcurl, Go, a Python with grpcio), and
 * the skip-or-fail rule: locally a test whose toolchain is missing is skipped with a
 * one-line reason; with EVORA_INTEROP_REQUIRED=1 (CI, after scripts/install-interop-tools.sh)
 * it fails instead.
 */

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const REQUIRED = process.env.EVORA_INTEROP_REQUIRED === '1';
const INSTALL_HINT = 'run scripts/install-interop-tools.sh';

/** A tool that was found (path), or why not. */
export type Tool = { ok: true; path: string } | { ok: false; reason: string };

function run(file: string, args: string[], opts: { cwd?: string } = {}): string {
  return execFileSync(file, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000, ...opts }).trim();
}

/** The first executable called `name` on PATH. */
export function onPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return null;
}

let goCache: Tool | undefined;
export function findGo(): Tool {
  if (goCache) return goCache;
  const path = onPath('go') ?? (existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : null);
  if (!path) return (goCache = { ok: false, reason: 'go not found on PATH or in /usr/local/go/bin' });
  try {
    run(path, ['version']);
    return (goCache = { ok: true, path });
  } catch (err) {
    return (goCache = { ok: false, reason: `${path} version failed: ${(err as Error).message.split('\n')[0]}` });
  }
}

/** $(go env GOPATH)/bin, where `go install` puts binaries; null without Go. */
export function goBin(): string | null {
  const go = findGo();
  if (!go.ok) return null;
  try {
    return join(run(go.path, ['env', 'GOPATH']), 'bin');
  } catch {
    return null;
  }
}

/** grpcurl on PATH, then in $(go env GOPATH)/bin. */
export function findGrpcurl(): Tool {
  const path = onPath('grpcurl') ?? [goBin()].map((d) => (d ? join(d, 'grpcurl') : '')).find((p) => p && existsSync(p));
  if (!path) return { ok: false, reason: `grpcurl not found on PATH or in $(go env GOPATH)/bin (${INSTALL_HINT})` };
  return { ok: true, path };
}

/**
 * A Python that can import grpc: $EVORA_PYTHON if set, else the venv .venv-interop/ at the
 * repository root (made by scripts/install-interop-tools.sh).
 */
export function findPython(): Tool {
  const fromEnv = process.env.EVORA_PYTHON;
  const path = fromEnv || join(REPO_ROOT, '.venv-interop', 'bin', 'python');
  const where = fromEnv ? `EVORA_PYTHON=${fromEnv}` : '.venv-interop/bin/python';
  if (!existsSync(path)) return { ok: false, reason: `no Python venv: ${where} does not exist (${INSTALL_HINT})` };
  try {
    run(path, ['-c', 'import grpc, google.protobuf']);
    return { ok: true, path };
  } catch {
    return { ok: false, reason: `${where} cannot import grpc and google.protobuf (${INSTALL_HINT})` };
  }
}

/**
 * Whether to skip a block that needs `tools`. Missing tools skip it with a one-line reason
 * on stderr, unless EVORA_INTEROP_REQUIRED=1, when the block runs and `assertTools` fails it.
 */
export function skipUnless(what: string, ...tools: Tool[]): boolean {
  const missing = tools.flatMap((t) => (t.ok ? [] : [t.reason]));
  if (missing.length === 0 || REQUIRED) return false;
  console.warn(`interop: skipping ${what}: ${missing.join('; ')}`);
  return true;
}

/** Throws (failing the test) if a tool is missing; used where skipUnless let a block run. */
export function assertTools(...tools: Tool[]): void {
  const missing = tools.flatMap((t) => (t.ok ? [] : [t.reason]));
  if (missing.length > 0) throw new Error(`EVORA_INTEROP_REQUIRED=1 but a toolchain is missing: ${missing.join('; ')}`);
}

/** The title of a block, telling why it is skipped when it is. */
export function titled(title: string, ...tools: Tool[]): string {
  const missing = tools.flatMap((t) => (t.ok ? [] : [t.reason]));
  return missing.length === 0 ? title : `${title} [${REQUIRED ? 'REQUIRED but ' : 'skipped: '}${missing.join('; ')}]`;
}

/** A child process with its output collected and a promise of how it ended. */
export interface Proc {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once stderr matches `re` (or rejects when the process ends first or on timeout). */
  waitStderr(re: RegExp, timeoutMs?: number): Promise<void>;
}

/** Spawns a process; it is killed if still running when `timeoutMs` passes. */
export function start(file: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Proc {
  const child = spawn(file, args, { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const listeners = new Set<() => void>();
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    err += d;
    for (const l of listeners) l();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      for (const l of listeners) l();
      res({ code, signal });
    }),
  );
  let ended = false;
  void exited.then(() => (ended = true));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitStderr(re, timeoutMs = 15_000) {
      return new Promise((res, rej) => {
        const check = () => {
          if (re.test(err)) done(null);
          else if (ended || child.exitCode !== null) done(new Error(`process ended before its stderr matched ${re}:\n${err}`));
        };
        const t = setTimeout(() => done(new Error(`stderr did not match ${re} within ${timeoutMs} ms:\n${err}`)), timeoutMs);
        const done = (e: Error | null) => {
          clearTimeout(t);
          listeners.delete(check);
          if (e) rej(e);
          else res();
        };
        listeners.add(check);
        check();
      });
    },
  };
}
