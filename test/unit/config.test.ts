import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_DOC, configLoad } from '../../src/server/config.js';

describe('configuration', () => {
  it('takes defaults, then the environment, then explicit flags', () => {
    expect(configLoad({}, {})).toMatchObject({ databaseUrl: null, host: '127.0.0.1', port: 50051, pollIntervalMs: 1000, metricsPort: 0 });
    expect(configLoad({}, { EVORA_PORT: '6000', DATABASE_URL: 'postgres://x' })).toMatchObject({ port: 6000, databaseUrl: 'postgres://x' });
    expect(configLoad({ port: '7000' }, { EVORA_PORT: '6000' }).port).toBe(7000);
    expect(configLoad({}, { EVORA_LOG_PRETTY: '1' }).logPretty).toBe(true);
  });

  it('refuses a malformed number with one line naming the variable and the flag', () => {
    expect(() => configLoad({}, { EVORA_PORT: 'abc' })).toThrow('EVORA_PORT (--port) must be a whole number, got "abc"');
  });

  it('asynchronous claim commits are off unless asked for', () => {
    expect(configLoad({}, {}).claimAsyncCommit).toBe(false);
    expect(configLoad({}, { EVORA_CLAIM_ASYNC_COMMIT: '1' }).claimAsyncCommit).toBe(true);
    expect(configLoad({ claimAsyncCommit: '0' }, { EVORA_CLAIM_ASYNC_COMMIT: '1' }).claimAsyncCommit).toBe(false);
    expect(() => configLoad({}, { EVORA_CLAIM_ASYNC_COMMIT: 'yes' })).toThrow('EVORA_CLAIM_ASYNC_COMMIT (--claim-async-commit) must be 0 or 1, got "yes"');
  });

  it('the README documents every setting with its variable, flag and default', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    for (const e of CONFIG_DOC) {
      const row = readme.split('\n').find((l) => l.startsWith(`| \`${e.env}\` |`));
      expect(row, `README lacks a row for ${e.env}`).toBeDefined();
      expect(row).toContain(`\`${e.flag}\``);
      expect(row).toContain(e.default ? `\`${e.default}\`` : '(unset)');
    }
  });
});
