import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * The process logger: JSON lines for machines; pretty output when writing to a terminal
 * (or EVORA_LOG_PRETTY=1). Components take child loggers with their own bindings
 * (job_id, queue, worker_id, ...).
 */
export function createLogger(opts: { level?: string; pretty?: boolean } = {}): Logger {
  const pretty = opts.pretty ?? process.stdout.isTTY === true;
  return pino({
    level: opts.level ?? 'info',
    base: { service: 'evora' },
    ...(pretty ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } } } : {}),
  });
}

/** A logger that drops everything; for tests and embedding. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
