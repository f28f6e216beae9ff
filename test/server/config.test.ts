import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_DOC, configLoad, limitsWarning } from '../../src/server/config.js';

describe('configuration', () => {
  it('takes defaults, then the environment, then explicit flags', () => {
    expect(configLoad({}, {})).toMatchObject({ databaseUrl: null, host: '127.0.0.1', port: 50051, pollIntervalMs: 1000, metricsPort: 0 });
    expect(configLoad({}, { EVORA_PORT: '6000', DATABASE_URL: 'postgres://x' })).toMatchObject({ port: 6000, databaseUrl: 'postgres://x' });
    expect(configLoad({ port: '7000' }, { EVORA_PORT: '6000' }).port).toBe(7000);
    expect(configLoad({}, { EVORA_LOG_PRETTY: '1' }).logPretty).toBe(true);
  });

  it('refuses a database URL pg would misread, with one line that does not repeat it', () => {
    // pg reads `localhost:5432` and a mysql:// URL as localhost:5432, and `not-a-url` as a host
    // named "base" (the server then waited for it: getaddrinfo ENOTFOUND base).
    for (const [value, why] of [
      ['not-a-url', 'does not start with postgres://'],
      ['localhost:5432', 'starts with "localhost:", not postgres:// or postgresql://'],
      ['mysql://x:secret@127.0.0.1/db', 'starts with "mysql:", not postgres:// or postgresql://'],
      ['postgres://u:secret@h:notaport/db', 'is not a valid URL (is the port a number? are special characters in the password percent-encoded?)'],
    ]) {
      let message = '';
      try {
        configLoad({}, { DATABASE_URL: value });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message, value).toBe(`DATABASE_URL (--database-url) must be a PostgreSQL URL such as postgres://user:password@host:5432/database; the value given ${why}`);
      expect(message).not.toContain('secret');
    }
    expect(() => configLoad({ directDatabaseUrl: 'pg.internal:5432' }, {})).toThrow(/^EVORA_DIRECT_DATABASE_URL \(--direct-database-url\) must be a PostgreSQL URL/);
    // An empty flag (`--database-url "$UNSET"`) is refused, the environment's URL too: taken as
    // unset it meant the embedded PostgreSQL, which `evora migrate` then created and migrated.
    expect(() => configLoad({ databaseUrl: '' }, { DATABASE_URL: 'postgres://prod/db' })).toThrow(
      '--database-url was given an empty value: give a PostgreSQL URL, or leave the flag out (then DATABASE_URL is used, and without it the embedded PostgreSQL)',
    );
    expect(() => configLoad({ directDatabaseUrl: '' }, {})).toThrow(/^--direct-database-url was given an empty value: .*then EVORA_DIRECT_DATABASE_URL is used, and without it DATABASE_URL\)$/);
    expect(configLoad({}, { DATABASE_URL: '' }).databaseUrl).toBeNull();
    for (const ok of ['postgresql://u:p@h:5432/db?sslmode=require', 'postgres://u:p@/db?host=/var/run/postgresql', 'postgres://u:p w@h/db', '/var/run/postgresql db', 'socket:/var/run/postgresql?db=x']) {
      expect(configLoad({}, { DATABASE_URL: ok }).databaseUrl, ok).toBe(ok);
    }
  });

  it('refuses a malformed number with one line naming the variable and the flag', () => {
    expect(() => configLoad({}, { EVORA_PORT: 'abc' })).toThrow('EVORA_PORT (--port) must be a whole number, got "abc"');
  });

  it('refuses an interval that would make its timer a busy loop or fire at once, and sizes out of range', () => {
    expect(() => configLoad({}, { EVORA_TLS_RELOAD_INTERVAL_MS: '0' })).toThrow('EVORA_TLS_RELOAD_INTERVAL_MS (--tls-reload-interval-ms) must be from 100 to 2147483647, got 0');
    expect(() => configLoad({ pollIntervalMs: '0' }, {})).toThrow('EVORA_POLL_INTERVAL_MS (--poll-interval-ms) must be from 10 to 2147483647, got 0');
    for (const env of ['EVORA_SWEEP_INTERVAL_MS', 'EVORA_ELECTION_INTERVAL_MS', 'EVORA_PROJECT_INTERVAL_MS', 'EVORA_PRUNE_INTERVAL_MS']) {
      expect(() => configLoad({}, { [env]: '1' }), env).toThrow(/must be from 10 to 2147483647, got 1$/);
      expect(() => configLoad({}, { [env]: '3000000000' }), env).toThrow(/must be from 10 to 2147483647/);
    }
    expect(() => configLoad({}, { EVORA_PRUNE_BATCH_SIZE: '0' })).toThrow(/must be from 1 to 100000/);
    expect(() => configLoad({}, { EVORA_DB_POOL_SIZE: '0' })).toThrow(/must be from 1 to 1000/);
    // Ports and sizes: Node's own error (or a server that refuses every payload) otherwise.
    expect(() => configLoad({}, { EVORA_PORT: '99999' })).toThrow('EVORA_PORT (--port) must be from 0 to 65535, got 99999');
    for (const env of ['EVORA_HTTP_PORT', 'EVORA_METRICS_PORT']) expect(() => configLoad({}, { [env]: '65536' }), env).toThrow(/must be from 0 to 65535, got 65536$/);
    expect(() => configLoad({}, { EVORA_PG_PORT: '0' })).toThrow(/must be from 1 to 65535, got 0$/);
    expect(() => configLoad({}, { EVORA_MAX_PAYLOAD_BYTES: '0' })).toThrow('EVORA_MAX_PAYLOAD_BYTES (--max-payload-bytes) must be from 16 to 1073741824, got 0');
    expect(() => configLoad({}, { EVORA_MAX_MESSAGE_BYTES: '10' })).toThrow(/must be from 1024 to 2147483647, got 10$/);
    expect(configLoad({}, { EVORA_TLS_RELOAD_INTERVAL_MS: '100', EVORA_PRUNE_INTERVAL_MS: '10' })).toMatchObject({ tlsReloadIntervalMs: 100, pruneIntervalMs: 10 });
  });

  it('warns at start of a payload limit that leaves less than 64 KiB of the message limit, and only then', () => {
    expect(limitsWarning(configLoad({}, {}))).toBeNull();
    expect(limitsWarning(configLoad({}, { EVORA_MAX_PAYLOAD_BYTES: String(4 * 1024 * 1024 - 64 * 1024) }))).toBeNull();
    expect(limitsWarning(configLoad({}, { EVORA_MAX_PAYLOAD_BYTES: String(4 * 1024 * 1024) }))).toBe(
      'EVORA_MAX_PAYLOAD_BYTES (4194304) leaves less than 64 KiB of EVORA_MAX_MESSAGE_BYTES (4194304) for the rest of a message: payloads and results near the payload limit are refused by the message limit (RESOURCE_EXHAUSTED) instead; raise EVORA_MAX_MESSAGE_BYTES to at least 4259840',
    );
  });

  it('audit retention: a year by default, 0 keeps events forever, otherwise 30 to 36500 days', () => {
    expect(configLoad({}, {}).auditRetentionDays).toBe(365);
    expect(configLoad({}, { EVORA_AUDIT_RETENTION_DAYS: '0' }).auditRetentionDays).toBe(0);
    expect(configLoad({ auditRetentionDays: '30' }, { EVORA_AUDIT_RETENTION_DAYS: '0' }).auditRetentionDays).toBe(30);
    expect(() => configLoad({}, { EVORA_AUDIT_RETENTION_DAYS: '7' })).toThrow(
      'EVORA_AUDIT_RETENTION_DAYS (--audit-retention-days) must be 0 (keep forever) or from 30 to 36500 (the database keeps the last 30 days of the audit log in any case), got 7',
    );
    expect(() => configLoad({}, { EVORA_AUDIT_RETENTION_DAYS: '36501' })).toThrow(/must be from 0 to 36500, got 36501/);
  });

  it('refuses a log level pino does not know, and a log-pretty value other than 0 or 1, with one line', () => {
    expect(configLoad({}, { EVORA_LOG_LEVEL: 'fatal' }).logLevel).toBe('fatal');
    expect(() => configLoad({ logLevel: 'loud' }, {})).toThrow('EVORA_LOG_LEVEL (--log-level) must be one of trace, debug, info, warn, error, fatal, silent, got "loud"');
    expect(configLoad({}, { EVORA_LOG_PRETTY: '0' }).logPretty).toBe(false);
    expect(configLoad({}, { EVORA_LOG_PRETTY: '' }).logPretty).toBeUndefined();
    expect(() => configLoad({}, { EVORA_LOG_PRETTY: 'yes' })).toThrow('EVORA_LOG_PRETTY (--log-pretty) must be 0 or 1 (or unset), got "yes"');
  });

  it('asynchronous claim commits are off unless asked for', () => {
    expect(configLoad({}, {}).claimAsyncCommit).toBe(false);
    expect(configLoad({}, { EVORA_CLAIM_ASYNC_COMMIT: '1' }).claimAsyncCommit).toBe(true);
    expect(configLoad({ claimAsyncCommit: '0' }, { EVORA_CLAIM_ASYNC_COMMIT: '1' }).claimAsyncCommit).toBe(false);
    expect(() => configLoad({}, { EVORA_CLAIM_ASYNC_COMMIT: 'yes' })).toThrow('EVORA_CLAIM_ASYNC_COMMIT (--claim-async-commit) must be 0 or 1, got "yes"');
  });

  it('auth settings: the bootstrap secret from the environment only, checked without repeating it; refresh bounded', () => {
    const secret = 'b'.repeat(40);
    expect(configLoad({}, { EVORA_BOOTSTRAP_ADMIN_TOKEN: secret }).bootstrapAdminToken).toBe(secret);
    expect(configLoad({}, {})).toMatchObject({ bootstrapAdminToken: null, insecureNoAuth: false, reflection: true, authRefreshMs: 2000 });
    expect(CONFIG_DOC.find((e) => e.key === 'bootstrapAdminToken')?.flag).toBe('');
    let message = '';
    try {
      configLoad({}, { EVORA_BOOTSTRAP_ADMIN_TOKEN: 'short-secret-xyz' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/at least 32 characters/);
    expect(message).not.toContain('short-secret-xyz');
    // Too long for a header: said so, not that its characters are wrong.
    expect(() => configLoad({}, { EVORA_BOOTSTRAP_ADMIN_TOKEN: 'b'.repeat(513) })).toThrow(/^EVORA_BOOTSTRAP_ADMIN_TOKEN must be at most 512 characters \(it has 513\)/);
    expect(configLoad({ reflection: '0', insecureNoAuth: '1' }, {})).toMatchObject({ reflection: false, insecureNoAuth: true, metricsOpen: false });
    expect(configLoad({}, { EVORA_METRICS_OPEN: '1' })).toMatchObject({ metricsOpen: true });
    expect(() => configLoad({}, { EVORA_METRICS_OPEN: '2' })).toThrow(/^EVORA_METRICS_OPEN \(--metrics-open\) must be 0 or 1, got "2"$/);
    expect(() => configLoad({}, { EVORA_AUTH_REFRESH_MS: '5000' })).toThrow(/from 100 to 4000/);
  });

  it('the README documents every setting with its variable, flag and default', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    for (const e of CONFIG_DOC) {
      const row = readme.split('\n').find((l) => l.startsWith(`| \`${e.env}\` |`));
      expect(row, `README lacks a row for ${e.env}`).toBeDefined();
      expect(row).toContain(e.flag ? `\`${e.flag}\`` : '(environment only)');
      expect(row).toContain(e.default ? `\`${e.default}\`` : '(unset)');
    }
    // The server bounds what it receives, not what it sends (grpc.max_send_message_length -1).
    const message = CONFIG_DOC.find((e) => e.env === 'EVORA_MAX_MESSAGE_BYTES');
    expect(message?.doc).toMatch(/receives/);
    expect(readme.split('\n').find((l) => l.startsWith('| `EVORA_MAX_MESSAGE_BYTES` |'))).toMatch(/receives/);
  });
});
