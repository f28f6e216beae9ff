import { pino, type Logger } from 'pino';
import sonicBoom, { type SonicBoom } from 'sonic-boom';

export type { Logger };

/**
 * The process logger: JSON lines for machines; pretty output when writing to a terminal
 * (or EVORA_LOG_PRETTY=1). Every line carries `service` and, when given, the package's
 * `version` (which release wrote it, during a rolling upgrade say; not shown on a terminal,
 * where it would take a line of every entry); components take child
 * loggers with their own bindings (job_id, queue, worker_id, ...). The JSON lines go to
 * standard output through `stdoutDestination()`, never pino's default destination (it says why).
 */
export function createLogger(opts: { level?: string; pretty?: boolean; version?: string } = {}): Logger {
  const pretty = opts.pretty ?? process.stdout.isTTY === true;
  const options = { level: opts.level ?? 'info', base: { service: 'evora', ...(opts.version ? { version: opts.version } : {}) } };
  if (pretty) return pino({ ...options, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,version' } } });
  return pino(options, stdoutDestination());
}

/** A logger that drops everything; for tests and embedding. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

let stdout: SonicBoom | undefined;

/**
 * Standard output as pino's destination, written by Evora's own sonic-boom (5, a dependency
 * of its own), as pino's default destination does with pino's: asynchronous writes, logging
 * stopped at the first EPIPE (whatever read the log has gone: that is no error of the
 * server's), and what is still buffered written at exit. Not pino's own: pino 10 asks for
 * sonic-boom 4, whose exit flush of a write failing EPIPE is retried for ever, so a server
 * whose log reader died (`| tee`, a shipper) never exited on SIGTERM. package.json's
 * `overrides` raise pino's copy to 5, but only in this repository: in a project that
 * installs Evora (`npm install evora`, `npx evora serve`) overrides do not apply
 * (test/package/package.test.ts). One per process: every logger shares it.
 */
function stdoutDestination(): SonicBoom {
  if (stdout) return stdout;
  const stream = new sonicBoom.SonicBoom({ fd: process.stdout.fd ?? 1 });
  const brokenPipe = (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') {
      stream.removeListener('error', brokenPipe);
      stream.emit('error', err);
      return;
    }
    stream.write = () => true;
    stream.end = () => {};
    stream.flushSync = () => {};
    stream.destroy = () => {};
  };
  stream.on('error', brokenPipe);
  process.once('exit', () => {
    try {
      stream.flushSync();
    } catch {
      // Nothing is left to tell it to: the log's reader has gone, or the stream was closed.
    }
  });
  stdout = stream;
  return stream;
}
