#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError } from 'commander';
import { CONFIG_BOOLEAN_KEYS, CONFIG_DOC, configLoad, type ServerConfig } from '../server/config.js';
import { EvoraApiError, DEFAULT_ADDRESS, DEFAULT_PORT } from '../sdk/index.js';
import { clientCommandsAdd } from './client-commands.js';
import { scheduleCommandsAdd } from './schedule-commands.js';
import { databaseFailure, dbCommandsAdd } from './db-commands.js';
import { operatorCommandsAdd } from './operator-commands.js';
import { tokenCommandsAdd } from './token-commands.js';
import { UsageError } from './flags.js';

/**
 * The `evora` command. `evora serve` runs the server (what `npm start` runs); the other
 * commands are clients of a running server, built on the SDK (docs/sdk.md, "CLI").
 *
 * Exit codes scripts can rely on:
 *   0 ok; 1 anything else; 2 bad usage or invalid argument (bad flags, bad JSON,
 *   INVALID_ARGUMENT); 3 NOT_FOUND; 4 conflict (ALREADY_EXISTS, FAILED_PRECONDITION);
 *   5 server unavailable or deadline exceeded; 6 (serve, migrate, db create-role) the
 *   database records migrations this version does not know (migrated by a newer Evora):
 *   starting again cannot help, so a supervisor can be told not to (systemd
 *   RestartPreventExitStatus=6).
 */
const EXIT = { OK: 0, FAILURE: 1, USAGE: 2, NOT_FOUND: 3, CONFLICT: 4, UNAVAILABLE: 5, SCHEMA_VERSION: 6 } as const;

/**
 * A refusal of the database's schema as another version's (src/store/migrate.ts
 * MigrationsUnknownError), told by name: client commands never load the store.
 */
function schemaOfOtherVersion(err: unknown): boolean {
  return err instanceof Error && err.name === 'MigrationsUnknownError';
}

function exitCodeFor(err: unknown): number {
  if (err instanceof UsageError || err instanceof TypeError) return EXIT.USAGE;
  if (schemaOfOtherVersion(err)) return EXIT.SCHEMA_VERSION;
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

/**
 * The version in Evora's package.json, found by walking up from this module: it is two
 * folders up from src/cli/ (tsx), three from dist/src/cli/ (the build), and further from the
 * CLI test's private build, so no fixed relative path fits all.
 */
function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'evora' && pkg.version) return pkg.version;
    } catch {
      // no package.json here (or not readable): keep walking up
    }
    const up = dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
}

/**
 * Commander's usage error, with a hint where an old habit is the likely cause: --state once
 * took several space-separated states, so `list --state dlq pending` now leaves `pending` as
 * an argument too many.
 */
function usageHint(line: string): string {
  if (!line.startsWith('too many arguments') || !process.argv.includes('--state')) return line;
  return `${line.trimEnd()} (--state takes several states comma-separated, --state dlq,pending, or repeated)\n`;
}

/**
 * Output whose reader has gone (`evora list | head -c 0`, `evora dlq | grep -q x`, a closed
 * terminal) is dropped: the write's EPIPE was an unhandled error that ended the command with
 * a stack trace and exit 1, after its call had been made (a submit or a purge done, a line
 * saying so lost). The command now runs to its end and exits as it would have; what it prints
 * after that goes nowhere. Errors other than a gone reader are still thrown. (serve logs
 * through pino's own destination, which handles EPIPE itself.)
 */
function stdoutReaderGoneIgnore(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE' || err.code === 'ERR_STREAM_DESTROYED') return;
    throw err;
  });
}
stdoutReaderGoneIgnore();

/**
 * `help [command]` for the program and for each command that has subcommands (`evora help
 * queue`, `evora queue help set`). A name it does not know is a usage error in one line,
 * `unknown command 'x'`, exit 2, as a mistyped command is; the help is for a name it knows.
 */
function helpCommandsAdd(parent: Command): void {
  for (const child of parent.commands) if (child.commands.length > 0) helpCommandsAdd(child);
  parent
    .command('help [command]')
    .description('display help for command')
    .action((name: string | undefined) => {
      if (name === undefined) parent.help();
      const sub = parent.commands.find((c) => c.name() === name || c.aliases().includes(name!));
      if (!sub) parent.error(`unknown command '${name}'`, { exitCode: 2, code: 'commander.unknownCommand' });
      sub!.help();
    });
}

const program = new Command('evora')
  .description('Evora: a job queue server on PostgreSQL, reached over gRPC')
  .version(packageVersion(), '-V, --version', 'print the version and exit')
  // Subcommand help lists these global options too (commander copies this setting into
  // every command added below, so it must come first).
  .configureHelp({ showGlobalOptions: true })
  // Commander's own `help <name>` printed the whole help for a name it does not know; the
  // help commands are added by helpCommandsAdd below instead (also copied into every command).
  .helpCommand(false)
  .option('--address <host:port>', `server the client commands talk to (not serve's listen address); without a port, Evora's ${DEFAULT_PORT} [env EVORA_ADDRESS, default ${DEFAULT_ADDRESS}]`)
  .option('--json', 'print results as JSON (for scripts)')
  .option('--timeout <duration>', 'deadline of each client call, e.g. 10s', '10s')
  .option('--tls-ca <file>', "TLS: the CA (PEM) that signed the server's certificate [env EVORA_TLS_CA; unset: plaintext]")
  .option('--tls-cert <file>', "mTLS: this client's certificate (PEM; needs --tls-key) [env EVORA_TLS_CLIENT_CERT]")
  .option('--tls-key <file>', "mTLS: the client certificate's private key (PEM) [env EVORA_TLS_CLIENT_KEY]")
  .option('--token <token>', 'API token, sent as authorization: Bearer <token>; visible to every user in the process list: prefer --token-file or EVORA_TOKEN [env EVORA_TOKEN]')
  .option('--token-file <path>', 'API token from the first line of this file, kept out of the process list; the first given wins: --token, --token-file, EVORA_TOKEN_FILE, EVORA_TOKEN [env EVORA_TOKEN_FILE]')
  .exitOverride()
  .configureOutput({ outputError: (str, write) => write(`evora: ${usageHint(str.replace(/^error: /, ''))}`) });

const serve = program.command('serve').description('run the Evora server (embedded PostgreSQL unless DATABASE_URL is set)');
// A 0/1 setting's flag may stand alone (`--insecure-no-auth` means 1) or take its value.
for (const e of CONFIG_DOC.filter((c) => c.flag)) {
  const value = CONFIG_BOOLEAN_KEYS.has(e.key) ? '[value]' : '<value>';
  serve.option(`${e.flag} ${value}`, `${e.doc} [env ${e.env}${e.default ? `, default ${e.default}` : ''}]`);
}
serve.action(async (opts: Record<string, string | boolean | undefined>) => {
  let config: ServerConfig;
  try {
    config = configLoad(Object.fromEntries(CONFIG_DOC.map((e) => [e.key, opts[e.key] === true ? '1' : (opts[e.key] as string | undefined)])));
  } catch (err) {
    console.error(`evora: ${(err as Error).message}`);
    process.exit(2);
  }
  // Loaded here so that the client commands start fast and never load server code.
  const { createLogger } = await import('../logger.js');
  const { serverStart, ServerStartAbortedError } = await import('../server/server.js');
  const logger = createLogger({ level: config.logLevel, pretty: config.logPretty, version: packageVersion() });
  // Exits once the log is written out. When its reader has gone (`evora serve | head -1`, a
  // log shipper that died), this write fails EPIPE, and pino then drops the log's further
  // writes: exiting at once instead would leave the last lines to pino's exit hook, whose
  // synchronous flush throws EPIPE out of process.exit and turned a clean stop into exit 1.
  // A flush that never calls back (a stuck log reader) cannot hold the exit: the code is set
  // first (a loop with nothing left exits with it) and a timer exits after 5 s regardless.
  const exit = (code: number) => {
    process.exitCode = code;
    setTimeout(() => process.exit(code), 5_000).unref();
    logger.flush(() => process.exit(code));
  };
  // Signals are handled from the start: one that arrives while the server waits for
  // PostgreSQL stops it at once (the start is aborted and undoes itself).
  const starting = new AbortController();
  let server: Awaited<ReturnType<typeof serverStart>> | null = null;
  let signals = 0;
  const onSignal = (signal: string) => {
    signals++;
    if (signals > 1) {
      logger.warn(`${signal} again: exiting now`);
      // Not after the log's flush: this is the way out when that flush cannot finish.
      process.exit(1);
    }
    logger.info({ signal }, 'signal received');
    if (!server) return starting.abort();
    server.stop().then(
      () => exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        exit(1);
      },
    );
  };
  // SIGHUP too: the embedded PostgreSQL has a process group of its own, so a closed
  // terminal's hangup reaches only us, and we must stop it (a death by signal would not).
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => onSignal(signal));
  try {
    server = await serverStart(config, logger, { signal: starting.signal, version: packageVersion() });
  } catch (err) {
    if (err instanceof ServerStartAbortedError) {
      logger.info('stopped');
      return exit(0);
    }
    // One line on stderr (the detail, with its stack, in the log at debug).
    logger.debug({ err }, 'start failed');
    console.error(`evora: ${errorLine(err)}`);
    return exit(schemaOfOtherVersion(err) ? EXIT.SCHEMA_VERSION : EXIT.FAILURE);
  }
  logger.info({ address: server.address, database: config.databaseUrl ? 'DATABASE_URL' : 'embedded' }, `Evora listening on ${server.address}`);
  if (server.httpUrl) logger.info({ url: `${server.httpUrl}/` }, `dashboard: ${server.httpUrl}/ (JSON API under ${server.httpUrl}/v1)`);
});

program
  .command('migrate')
  .description(
    'apply pending database migrations and exit (the server also applies them when it starts). Without --database-url it starts ' +
      "the embedded PostgreSQL itself, so stop `evora serve` first, or pass the running server's URL (printed at its start)",
  )
  .option('--database-url <url>', 'PostgreSQL connection string [env DATABASE_URL; unset: the embedded PostgreSQL]')
  .option('--direct-database-url <url>', 'PostgreSQL itself when DATABASE_URL is a pooler: migrations run there [env EVORA_DIRECT_DATABASE_URL]')
  .option('--data-dir <dir>', 'data folder of the embedded PostgreSQL [env EVORA_DATA_DIR, default .evora]')
  .option('--embedded-pg-port <port>', 'port of the embedded PostgreSQL [env EVORA_PG_PORT, default 54329]')
  .action(async (opts: { databaseUrl?: string; directDatabaseUrl?: string; dataDir?: string; embeddedPgPort?: string }) => {
    let config: ServerConfig;
    try {
      config = configLoad({ databaseUrl: opts.databaseUrl, directDatabaseUrl: opts.directDatabaseUrl, dataDir: opts.dataDir, embeddedPgPort: opts.embeddedPgPort });
    } catch (err) {
      // A malformed setting (a flag or its variable) is bad usage, exit 2, as for `serve`.
      throw new UsageError((err as Error).message);
    }
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
      const applied = await migrate((config.databaseUrl && config.directDatabaseUrl) || config.databaseUrl || embedded!.url, undefined, {
        waiting: (line) => process.stderr.write(`evora: ${line}\n`),
      });
      const line = applied.length === 0 ? 'evora: the schema is up to date' : `evora: applied migrations ${applied.join(', ')}`;
      process.stdout.write(`${program.opts<{ json?: boolean }>().json ? JSON.stringify({ applied }) : line}\n`);
    } catch (err) {
      throw await databaseFailure(err, 'migrate');
    } finally {
      await embedded?.stop();
    }
  });

clientCommandsAdd(program);
operatorCommandsAdd(program);
scheduleCommandsAdd(program);
dbCommandsAdd(program);
tokenCommandsAdd(program);
helpCommandsAdd(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof CommanderError) {
    // Commander already printed its message (or the help). Help or the version asked for
    // (`--help`, `help <command>`, `--version`) is success; help shown because a command was
    // missing (`evora`, `evora queue`) is a usage error, which commander marks exitCode 1.
    const asked = ['commander.helpDisplayed', 'commander.help', 'commander.version'].includes(err.code) && err.exitCode === 0;
    process.exitCode = asked ? EXIT.OK : EXIT.USAGE;
    return;
  }
  console.error(`evora: ${errorLine(err)}`);
  process.exitCode = exitCodeFor(err);
});
