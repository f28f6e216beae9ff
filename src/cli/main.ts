#!/usr/bin/env node
import { Command } from 'commander';
import { CONFIG_DOC, configLoad, type ServerConfig } from '../config.js';
import { createLogger } from '../logger.js';
import { serverStart } from '../server/server.js';

/**
 * The `evora` command. `evora serve` runs the server (what `npm start` runs); the client
 * commands arrive with the SDK.
 */
const program = new Command('evora').description('Evora: a job queue server on PostgreSQL, reached over gRPC');

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
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));
});

program.parseAsync(process.argv).catch((err: unknown) => {
  console.error(`evora: ${(err as Error).message}`);
  process.exit(1);
});
