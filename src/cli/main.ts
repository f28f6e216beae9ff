#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { CONFIG_DOC, configLoad, type ServerConfig } from '../server/config.js';
import { EvoraApiError, DEFAULT_ADDRESS } from '../sdk/index.js';
import { clientCommandsAdd } from './client-commands.js';
import { UsageError } from './format.js';

/**
 * The `evora` command. `evora serve` runs the server (what `npm start` runs); the other
 * commands are clients of a running server, built on the SDK (docs/sdk.md, "CLI").
 *
 * Exit codes scripts can rely on:
 *   0 ok; 1 anything else; 2 bad usage or invalid argument (bad flags, bad JSON,
 *   INVALID_ARGUMENT); 3 NOT_FOUND; 4 conflict (ALREADY_EXISTS, FAILED_PRECONDITION);
 *   5 server unavailable or deadline exceeded.
 */
const EXIT = { OK: 0, FAILURE: 1, USAGE: 2, NOT_FOUND: 3, CONFLICT: 4, UNAVAILABLE: 5 } as const;

function exitCodeFor(err: unknown): number {
  if (err instanceof UsageError || err instanceof TypeError) return EXIT.USAGE;
  if (err instanceof EvoraApiError) {
    switch (err.codeName) {
      case 'INVALID_ARGUMENT':
      case 'OUT_OF_RANGE':
        return EXIT.USAGE;
      case 'NOT_FOUND':
        return EXIT.NOT_FOUND;
      case 'ALREADY_EXISTS':
      case 'FAILED_PRECONDITION':
      case 'ABORTED':
        return EXIT.CONFLICT;
      case 'UNAVAILABLE':
      case 'DEADLINE_EXCEEDED':
        return EXIT.UNAVAILABLE;
      default:
        return EXIT.FAILURE;
    }
  }
  return EXIT.FAILURE;
}

/** One line on stderr: `evora: NOT_FOUND: job … not found`. */
function errorLine(err: unknown): string {
  if (err instanceof EvoraApiError) return `${err.codeName}: ${err.message}`;
  return (err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' ');
}

const program = new Command('evora')
  .description('Evora: a job queue server on PostgreSQL, reached over gRPC')
  .option('--address <host:port>', `server to talk to [env EVORA_ADDRESS, default ${DEFAULT_ADDRESS}]`)
  .option('--json', 'print results as JSON (for scripts)')
  .option('--timeout <duration>', 'deadline of each call, e.g. 10s', '10s')
  .exitOverride()
  .configureOutput({ outputError: (str, write) => write(`evora: ${str.replace(/^error: /, '')}`) });

const serve = program.command('serve').description('run the Evora server (embedded PostgreSQL unless DATABASE_URL is set)');
for (const e of CONFIG_DOC) serve.option(`${e.flag} <value>`, `${e.doc} [env ${e.env}${e.default ? `, default ${e.default}` : ''}]`);
serve.action(async (opts: Record<string, string | undefined>) => {
  let config: ServerConfig;
  try {
    config = configLoad(Object.fromEntries(CONFIG_DOC.map((e) => [e.key, opts[e.key]])));
  } catch (err) {
    console.error(`evora: ${(err as Error).message}`);
    process.exit(2);
  }
  // Loaded here so that the client commands start fast and never load server code.
  const { createLogger } = await import('../logger.js');
  const { serverStart } = await import('../server/server.js');
  const logger = createLogger({ level: config.logLevel, pretty: config.logPretty });
  let server;
  try {
    server = await serverStart(config, logger);
  } catch (err) {
    logger.fatal({ err }, (err as Error).message);
    process.exit(1);
  }
  logger.info({ address: server.address, database: config.databaseUrl ? 'DATABASE_URL' : 'embedded' }, `Evora listening on ${server.address}`);
  let signals = 0;
  const onSignal = (signal: string) => {
    signals++;
    if (signals > 1) {
      logger.warn(`${signal} again: exiting now`);
      process.exit(1);
    }
    logger.info({ signal }, 'signal received');
    server.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // SIGHUP too: the embedded PostgreSQL has a process group of its own, so a closed
  // terminal's hangup reaches only us, and we must stop it (a death by signal would not).
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => onSignal(signal));
});

program
  .command('migrate')
  .description('apply pending database migrations and exit (the server also applies them when it starts)')
  .option('--database-url <url>', 'PostgreSQL connection string [env DATABASE_URL; unset: the embedded PostgreSQL]')
  .option('--data-dir <dir>', 'data folder of the embedded PostgreSQL [env EVORA_DATA_DIR, default .evora]')
  .option('--embedded-pg-port <port>', 'port of the embedded PostgreSQL [env EVORA_PG_PORT, default 54329]')
  .action(async (opts: { databaseUrl?: string; dataDir?: string; embeddedPgPort?: string }) => {
    const config = configLoad({ databaseUrl: opts.databaseUrl, dataDir: opts.dataDir, embeddedPgPort: opts.embeddedPgPort });
    const { migrate } = await import('../store/migrate.js');
    const { embeddedPostgresStart } = await import('../server/embedded-postgres.js');
    const { join } = await import('node:path');
    // A signal exits through process.exit, whose exit hook stops the embedded PostgreSQL (in
    // a process group of its own, it does not get the terminal's signals).
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => process.exit(1));
    const embedded = config.databaseUrl
      ? null
      : await embeddedPostgresStart({ dataDir: join(config.dataDir, 'pgdata'), port: config.embeddedPgPort });
    try {
      const applied = await migrate(config.databaseUrl ?? embedded!.url);
      const line = applied.length === 0 ? 'evora: the schema is up to date' : `evora: applied migrations ${applied.join(', ')}`;
      process.stdout.write(`${program.opts<{ json?: boolean }>().json ? JSON.stringify({ applied }) : line}\n`);
    } finally {
      await embedded?.stop();
    }
  });

clientCommandsAdd(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof CommanderError) {
    // Commander already printed its message (or the help). Help asked for is success.
    process.exitCode = err.code === 'commander.helpDisplayed' || err.code === 'commander.version' ? EXIT.OK : EXIT.USAGE;
    return;
  }
  console.error(`evora: ${errorLine(err)}`);
  process.exitCode = exitCodeFor(err);
});
