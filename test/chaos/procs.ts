import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync, type WriteStream } from 'node:fs';

/**
 * The chaos suite's child processes (Evora servers and SDK workers): spawned with their
 * output in a log file of the run folder, killed and restarted on the fault schedule, and
 * watched. Every exit the orchestrator did not cause itself (a SIGKILL or SIGTERM it sent)
 * is an unexpected exit: recorded with its code, signal and the tail of its log, and the
 * process is started again so the run goes on.
 * Must stay true: `expecting` is set before the orchestrator signals, so its own kills are
 * never counted; a process is never restarted once the run shuts down.
 */

/** One exit the orchestrator did not cause. */
export interface UnexpectedExit {
  name: string;
  pid: number;
  code: number | null;
  signal: string | null;
  atMs: number;
  /** When during the run: 'run', or 'shutdown' for a bad exit after the orchestrator's SIGTERM. */
  phase: 'run' | 'shutdown';
  logTail: string;
  /** The likely cause, read from the log tail (filled in with it). */
  cause: string;
}

/** How to start one process. */
export interface ProcSpec {
  name: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  logPath: string;
  /** A line of output that says the process is ready (else: ready at spawn). */
  readyPattern?: RegExp;
  /** Open an IPC channel (workers) and pass its messages here. */
  onMessage?: (msg: unknown) => void;
}

const t0 = Date.now();

/** A child process that the orchestrator may kill, freeze and restart. */
export class ChaosProcess {
  child: ChildProcess | null = null;
  /** Frozen by SIGSTOP and not yet continued. */
  stopped = false;
  /** Starts (first included). */
  starts = 0;
  private expecting: 'kill' | 'term' | null = null;
  private log: WriteStream;
  private ready: Promise<void> = Promise.resolve();
  private exited: Promise<void> = Promise.resolve();
  private restartTimer: NodeJS.Timeout | null = null;
  private shuttingDown = false;

  constructor(
    readonly spec: ProcSpec,
    private readonly onUnexpected: (exit: UnexpectedExit) => void,
    private readonly restartDelayMs = 1000,
  ) {
    this.log = createWriteStream(spec.logPath, { flags: 'a' });
  }

  get name(): string {
    return this.spec.name;
  }

  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  /** Running: spawned and not yet exited. */
  get alive(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Spawns the process; resolves when it is ready (its ready line, or at once). */
  start(): Promise<void> {
    if (this.alive) return this.ready;
    this.starts++;
    this.expecting = null;
    this.stopped = false;
    const { spec } = this;
    this.log.write(`\n=== chaos: start #${this.starts} at +${Date.now() - t0}ms: ${spec.command} ${spec.args.join(' ')}\n`);
    const child = spawn(spec.command, spec.args, {
      env: spec.env,
      stdio: spec.onMessage ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    if (spec.onMessage) child.on('message', spec.onMessage);
    let seen = '';
    this.ready = new Promise<void>((resolveReady, reject) => {
      if (!spec.readyPattern) return resolveReady();
      const onData = (chunk: Buffer) => {
        seen = (seen + chunk.toString('utf8')).slice(-4096);
        if (spec.readyPattern!.test(seen)) {
          child.stdout?.off('data', onData);
          resolveReady();
        }
      };
      child.stdout?.on('data', onData);
      child.once('exit', (code, signal) => reject(new Error(`${spec.name} exited (${code ?? signal}) before it was ready`)));
    });
    this.ready.catch(() => undefined);
    child.stdout?.pipe(this.log, { end: false });
    child.stderr?.pipe(this.log, { end: false });
    this.exited = new Promise<void>((resolveExit) => {
      child.once('exit', (code, signal) => {
        this.log.write(`=== chaos: exit (code ${code}, signal ${signal}) at +${Date.now() - t0}ms\n`);
        this.onExit(child, code, signal);
        resolveExit();
      });
    });
    child.once('error', (err) => this.log.write(`=== chaos: spawn error ${err.message}\n`));
    return this.ready;
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    const expected =
      (this.expecting === 'kill' && signal === 'SIGKILL') ||
      (this.expecting === 'term' && (code === 0 || signal === 'SIGTERM'));
    if (expected) return;
    const exit: UnexpectedExit = {
      name: this.name,
      pid: child.pid ?? -1,
      code,
      signal,
      atMs: Date.now() - t0,
      phase: this.shuttingDown ? 'shutdown' : 'run',
      logTail: '',
      cause: code !== null ? `exit code ${code}` : `signal ${signal}`,
    };
    this.onUnexpected(exit);
    // The last lines reach the log file a moment after the exit.
    setTimeout(() => {
      exit.logTail = this.tail();
      exit.cause = exitCause(exit.logTail) ?? exit.cause;
    }, 300).unref();
    if (!this.shuttingDown && this.expecting === null) {
      // The run goes on: start it again after a moment.
      this.restartLater(this.restartDelayMs);
    }
  }

  /** Starts the process again after `ms` (unless the run shuts down first). */
  restartLater(ms: number): void {
    if (this.restartTimer) return;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      if (!this.shuttingDown && !this.alive) this.start().catch(() => undefined);
    }, ms);
  }

  /** SIGKILL (counted as the orchestrator's own); resolves when the process is gone. */
  async kill(): Promise<void> {
    if (!this.alive) return;
    this.expecting = 'kill';
    this.child!.kill('SIGKILL');
    await this.exited;
  }

  /** SIGSTOP: the process freezes, its timers and sockets with it. */
  freeze(): void {
    if (!this.alive || this.stopped) return;
    this.stopped = true;
    this.child!.kill('SIGSTOP');
  }

  /** SIGCONT after freeze(). */
  thaw(): void {
    if (!this.stopped) return;
    this.stopped = false;
    if (this.alive) this.child!.kill('SIGCONT');
  }

  /**
   * Graceful stop at the end of the run: SIGTERM, then SIGKILL after `timeoutMs` (a hang
   * on shutdown is recorded as an unexpected exit). No restart afterwards.
   */
  async terminate(timeoutMs: number): Promise<void> {
    this.shuttingDown = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    if (!this.alive) return;
    this.thaw();
    this.expecting = 'term';
    this.child!.kill('SIGTERM');
    const hung = setTimeout(() => {
      this.expecting = null;
      this.log.write(`=== chaos: no exit ${timeoutMs}ms after SIGTERM: SIGKILL\n`);
      this.child?.kill('SIGKILL');
    }, timeoutMs);
    await this.exited;
    clearTimeout(hung);
  }

  /** Immediate SIGKILL of whatever runs, for cleanup on errors and Ctrl-C (synchronous). */
  killNow(): void {
    this.shuttingDown = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    if (this.alive) {
      this.expecting = 'kill';
      this.child!.kill('SIGKILL');
    }
  }

  async closeLog(): Promise<void> {
    await new Promise<void>((r) => this.log.end(r));
  }

  private tail(): string {
    try {
      const text = readFileSync(this.spec.logPath, 'utf8');
      // This start's output only.
      return text.slice(text.lastIndexOf('=== chaos: start')).trim().split('\n').slice(-40).join('\n');
    } catch {
      return '';
    }
  }
}

/**
 * The likely cause of a crash, from the end of its log: an unhandled 'error' event (with
 * the error's first line), or the message of the last fatal log line; null if neither.
 */
export function exitCause(tail: string): string | null {
  const lines = tail.split('\n');
  const unhandled = lines.findIndex((l) => l.includes("Unhandled 'error' event"));
  if (unhandled >= 0) {
    const what = lines.slice(unhandled + 1).find((l) => /^\S*(error|Error)\b/.test(l.trim()));
    return `unhandled 'error' event: ${what?.trim() ?? '?'}`;
  }
  const uncaught = lines.find((l) => /^(Error|TypeError|RangeError|error):/.test(l.trim()));
  for (const line of [...lines].reverse()) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as { level?: number; msg?: string };
      if ((entry.level ?? 0) >= 60) return `fatal: ${entry.msg ?? '?'}`;
    } catch {
      // not a log line
    }
  }
  return uncaught ? `crashed on ${uncaught.trim()}` : null;
}
