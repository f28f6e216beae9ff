import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAgeOrTime, parseDuration, parseInteger, parseTime } from '../../src/cli/flags.js';
import { countedText, duration, fields, jobDetails, oneLine, shellWord, table } from '../../src/cli/format.js';
import type { Job } from '../../src/sdk/index.js';
import { deadlineText, tokenOption, unavailableText } from '../../src/cli/client-context.js';
import { EvoraApiError } from '../../src/sdk/index.js';
import { teardownAdd } from '../helpers/teardown.js';

/** The CLI's label/value layout (`evora get`), pure formatting. */
describe('fields', () => {
  it('lines up the values; a value of several lines continues indented under its first line, never at the labels\' column', () => {
    const out = fields([
      ['state', 'DLQ'],
      ['last error', 'TypeError: boom\n    at handler (job.js:3)\r\n    at run (worker.js:9)'],
      ['payload', '{}'],
    ]);
    expect(out.split('\n')).toEqual([
      'state       DLQ',
      'last error  TypeError: boom',
      '                at handler (job.js:3)',
      '                at run (worker.js:9)',
      'payload     {}',
    ]);
  });
});

/** `evora get`'s children: the first ten, and how many more GetJob listed. */
describe('jobDetails children', () => {
  it('says how many more; a list as long as GetJob gives (1,000) may stand for more, so "at least"', () => {
    const job = { id: 'j', queue: 'q', type: 't', state: 'PENDING', attempt: 0, maxAttempts: 5, priority: 0, dependsOn: [], payload: {} } as unknown as Job;
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `c${i}`);
    const children = (n: number) => /^children\s+(.*)$/m.exec(jobDetails(job, ids(n)))![1];
    expect(children(0)).toBe('-');
    expect(children(10)).toBe(ids(10).join(', '));
    expect(children(11)).toBe(`${ids(10).join(', ')}, and 1 more`);
    expect(children(999)).toMatch(/, and 989 more$/);
    expect(children(1000)).toMatch(/, and at least 990 more$/);
  });
});

/** Values past what the wire or the server takes are refused by the flag's name, not the SDK's field's. */
describe('flag values out of range', () => {
  it('integers past an int32, durations past a Duration, times past a Timestamp', () => {
    const refused = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return (err as Error).message;
      }
      return 'accepted';
    };
    expect(refused(() => parseInteger('99999999999', '--lease-seconds', 1))).toBe('--lease-seconds must be from 1 to 2147483647, got 99999999999');
    expect(refused(() => parseInteger('-99999999999', '--n'))).toBe('--n must be from -2147483648 to 2147483647, got -99999999999');
    expect(parseInteger('2147483647', '--n')).toBe(2147483647);
    expect(refused(() => parseDuration('99999999999d', '--backoff-cap'))).toBe('--backoff-cap must be at most 315576000000s (about 10,000 years), got "99999999999d"');
    expect(refused(() => parseDuration('9'.repeat(400), '--expires'))).toMatch(/^--expires must be at most 315576000000s/);
    expect(refused(() => parseTime('3000000d', '--run-at'))).toBe('--run-at "3000000d" is outside 0001-01-01 to 9999-12-31 (UTC)');
    expect(refused(() => parseAgeOrTime('3000000d', '--finished-before'))).toBe('--finished-before "3000000d" is outside 0001-01-01 to 9999-12-31 (UTC)');
    expect(parseTime('9999-12-31T23:59:59Z', '--run-at').toISOString()).toBe('9999-12-31T23:59:59.000Z');
  });
});

/** Where the CLI's token comes from: --token, else --token-file, else EVORA_TOKEN_FILE, else EVORA_TOKEN. */
describe('tokenOption', () => {
  it('takes the flag, then the file (first line, trimmed), then the variable; refuses an unreadable or empty file without printing a token', () => {
    const dir = mkdtempSync(join(tmpdir(), 'evora-token-option-'));
    teardownAdd(() => rmSync(dir, { recursive: true, force: true }));
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const good = file('good', '  secret-file \r\nnot this\n');
    const envFile = file('env', 'secret-env-file\n');
    const env = { EVORA_TOKEN: 'secret-env', EVORA_TOKEN_FILE: envFile };
    expect(tokenOption({ token: 'secret-flag', tokenFile: good }, env)).toEqual({ token: 'secret-flag' });
    expect(tokenOption({ tokenFile: good }, env)).toEqual({ token: 'secret-file' });
    expect(tokenOption({}, env)).toEqual({ token: 'secret-env-file' });
    expect(tokenOption({}, { EVORA_TOKEN: ' secret-env\n', EVORA_TOKEN_FILE: '' })).toEqual({ token: 'secret-env' });
    expect(tokenOption({}, {})).toEqual({});

    const unreadable = file('unreadable', 'secret-unreadable\n');
    chmodSync(unreadable, 0o000);
    const refused: [Parameters<typeof tokenOption>[0], Parameters<typeof tokenOption>[1], RegExp][] = [
      [{ tokenFile: join(dir, 'missing') }, {}, /^--token-file: cannot read .*missing \(ENOENT\)$/],
      [{ tokenFile: dir }, {}, /^--token-file: cannot read .* \(EISDIR\)$/],
      [{}, { EVORA_TOKEN_FILE: file('empty', '') }, /^EVORA_TOKEN_FILE: the first line of .*empty is empty: it must hold the token$/],
      [{ tokenFile: file('blank', ' \nsecret-line-two\n') }, {}, /^--token-file: the first line of .*blank is empty/],
      [{ tokenFile: '' }, { EVORA_TOKEN: 'secret-env' }, /^--token-file is empty: give the path/],
      [{ tokenFile: file('spaced', 'secret with spaces\n') }, {}, /^the token in --token-file must be printable ASCII without spaces$/],
    ];
    // As root, a mode of 000 does not keep the file from being read.
    if (process.getuid?.() !== 0) refused.push([{ tokenFile: unreadable }, {}, /^--token-file: cannot read .*unreadable \(EACCES\)$/]);
    for (const [g, e, message] of refused) {
      let thrown: unknown;
      try {
        tokenOption(g, e);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, String(message)).toMatchObject({ name: 'UsageError', message: expect.stringMatching(message) });
      expect((thrown as Error).message).not.toMatch(/secret/);
    }
  });
});

/** A call past its --timeout: one line, and for a write what may have happened and how to tell, never claiming either way. */
describe('deadlineText', () => {
  const late = (method: string, notSent = false) => new EvoraApiError({ code: 4, details: 'Deadline exceeded after 1.001s', method, notSent });
  const tail = (method: string, subject?: string, notSent = false) => {
    const line = deadlineText(late(method, notSent), 'db1:50051', '1', subject);
    expect(line.startsWith(`${method} got no answer from the Evora server at db1:50051 within 1s (raise --timeout `)).toBe(true);
    return line.slice(line.indexOf(')') + 1);
  };
  it('a read says nothing more; a submit whether the job went out; every other write that it may have been applied and the command that tells', () => {
    expect(tail('ListQueues')).toBe('');
    expect(tail('GetJob', '0189')).toBe('');
    expect(tail('SubmitJob')).toBe('; the job may have been submitted');
    expect(tail('SubmitJob', undefined, true)).toBe('; the job was not submitted');
    const id = '01890000-0000-7000-8000-000000000001';
    expect(tail('CancelJob', id)).toBe(`; the cancel may or may not have been applied: check with evora get ${id}`);
    expect(tail('RetryJob', id)).toBe(`; the retry may or may not have been applied: check with evora get ${id}`);
    // A bulk action commits batch by batch and stops at the deadline: part of it may be done, and running it again goes on.
    expect(tail('RetryJobs')).toBe(
      '; the retry stopped there with none, some or all of the matching jobs retried (the batches it committed stay retried): run it again with a longer ' +
        '--timeout (e.g. --timeout 10m) to go on, or check with evora retry --all --dry-run and the same filters (it counts the jobs still to retry)',
    );
    expect(tail('PurgeJobs')).toMatch(/^; the purge stopped there with none, some or all of the matching jobs deleted \(the batches it committed stay deleted\): run it again .* check with evora purge --dry-run and the same filters /);
    expect(tail('CancelJobs')).toMatch(/^; the cancel stopped there with none, some or all of the matching jobs cancelled \(the batches it committed stay cancelled\): run it again .* check with evora cancel --all --dry-run and the same filters /);
    expect(tail('UpsertQueue', 'billing.eu')).toBe('; the change may or may not have been applied: check with evora queue get billing.eu');
    expect(tail('PauseQueue', 'billing')).toBe('; the pause may or may not have been applied: check with evora queue get billing');
    expect(tail('ResumeQueue', 'billing')).toBe('; the resume may or may not have been applied: check with evora queue get billing');
    expect(tail('UpsertSchedule', 'nightly')).toBe('; the change may or may not have been applied: check with evora schedule get nightly');
    expect(tail('TriggerSchedule', 'nightly')).toMatch(/^; the trigger may or may not have been applied: check with evora schedule get nightly \(its last run/);
    expect(tail('DeleteSchedule', 'nightly')).toMatch(/^; the delete may or may not have been applied: check with evora schedule get nightly /);
    expect(tail('CreateToken')).toMatch(/^; the token may or may not have been created: check with evora token list \(.*revoke it\)$/);
    // The token revoked is named, as given (an id or a name).
    expect(tail('RevokeToken', 'ci-bot')).toBe('; the revoke of token ci-bot may or may not have been applied: check with evora token list --all (its REVOKED column for ci-bot)');
    // A name a shell would split or expand is quoted, so the printed command can be copied.
    expect(tail('PauseQueue', "it's mine")).toBe(`; the pause may or may not have been applied: check with evora queue get 'it'\\''s mine'`);
  });

  it("the check repeats the connection flags given, quoted, so that it asks the same server the same way; a --token value is never printed", () => {
    const check = (connection: Parameters<typeof deadlineText>[4]) => {
      const line = deadlineText(late('PauseQueue'), 'db1:50051', '1', 'billing', connection);
      return line.slice(line.indexOf('check with ') + 'check with '.length);
    };
    // From the environment: nothing to repeat (the shell the copy runs in still has it); an empty flag falls back to it too.
    expect(check({})).toBe('evora queue get billing');
    expect(check({ address: '', tlsCa: '' })).toBe('evora queue get billing');
    expect(check({ address: 'db1', tlsCa: 'certs/ca.pem', tlsCert: 'my client.pem', tlsKey: 'client.key', tokenFile: '/run/evora token' })).toBe(
      "evora --address db1 --tls-ca certs/ca.pem --tls-cert 'my client.pem' --tls-key client.key --token-file '/run/evora token' queue get billing",
    );
    const secret = 'evora_s3cr3t-value-of-at-least-32-chars';
    // --token wins over --token-file (tokenOption), so neither is repeated: the line says how to give the token instead.
    const withToken = check({ address: '[::1]:6000', token: secret, tokenFile: 'token.txt' });
    expect(withToken).toBe("evora --address '[::1]:6000' queue get billing, with your token in EVORA_TOKEN or --token-file <path>: the --token given is not printed");
    expect(withToken).not.toContain(secret);
    // The flags go right after `evora`, also in a check that is described rather than spelled out.
    expect(deadlineText(late('RetryJobs'), 'db1:50051', '1', undefined, { address: 'db1' })).toMatch(/check with evora --address db1 retry --all --dry-run and the same filters /);
  });
});

/** A bulk dry run's line (retry --all --dry-run, purge --dry-run). */
describe('countedText', () => {
  it('names the --finished-before that keeps the action to the jobs counted, which the flag reads back to the same millisecond', () => {
    const finishedBefore = new Date('2026-11-29T13:58:01.124Z');
    const line = countedText({ count: 37, finishedBefore }, 'retried', 'retry');
    expect(line).toBe('37 jobs would be retried; to retry these and none that finish later, add --finished-before 2026-11-29T13:58:01.124Z');
    expect(parseAgeOrTime(line.split(' ').at(-1)!, '--finished-before')).toEqual(finishedBefore);
    expect(countedText({ count: 1, finishedBefore }, 'deleted', 'delete')).toBe('1 job would be deleted; to delete it and none that finish later, add --finished-before 2026-11-29T13:58:01.124Z');
    expect(countedText({ count: 0, finishedBefore: null }, 'deleted', 'delete')).toBe('0 jobs would be deleted');
  });
});

/**
 * A worker's error reaches the operator's terminal through `evora dlq` (the group's error in
 * the table, and in the commands printed for copying), `list` and `get`.
 */
describe('text from workers in the CLI output', () => {
  const errors = ['HTTP 503\r', 'red \u001b[31malert\u001b[0m', "tab\tand 'quote' and \\ back", 'nel \u0085 del \u007f', 'ünï ✓'];

  it('control characters are shown as escapes, never printed raw for the terminal to act on', () => {
    const raw = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
    for (const e of errors) {
      expect(oneLine(e, 200)).not.toMatch(raw);
      expect(table(['ERROR'], [[e]])).not.toMatch(raw);
      expect(fields([['last error', `${e}\r\nat line 2`]])).not.toMatch(raw);
    }
    expect(oneLine('red \u001b[31malert', 80)).toBe('red \\x1b[31malert');
    expect(table(['ERROR'], [['HTTP 503\r']])).toBe('ERROR\nHTTP 503\\r');
    // A stack trace's lines still continue under the first, CRLF or LF.
    expect(fields([['last error', 'boom\r\n  at f']]).split('\n')).toEqual(['last error  boom', '              at f']);
  });

  it('shellWord: a word with control characters is $\'…\' with their escapes, and bash reads every word back exactly', () => {
    expect(shellWord('HTTP 503\r')).toBe("$'HTTP 503\\r'");
    expect(shellWord('red \u001b[31m')).toBe("$'red \\x1b[31m'");
    expect(shellWord("it's")).toBe("'it'\\''s'");
    const words = [...errors, "it's", 'plain', 'two\nlines'];
    const out = execFileSync('bash', ['-c', `printf '%s\\0' ${words.map(shellWord).join(' ')}`]).toString('utf8');
    expect(out.split('\0').slice(0, -1)).toEqual(words);
    for (const w of words) expect(shellWord(w)).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
  });
});

describe('duration', () => {
  it('shows a setting to the millisecond, as the duration flags read it back', () => {
    expect(duration(1.5)).toBe('1s500ms');
    expect(duration(5400)).toBe('1h30m');
    expect(duration(0.25)).toBe('250ms');
    expect(duration(0)).toBe('0s');
    for (const seconds of [1.5, 0.25, 30, 90.5, 86_400.5, 604_800, 3_153_600_000]) expect(parseDuration(duration(seconds), '--completed-retention')).toBe(seconds);
  });
});

describe('unavailableText', () => {
  const unavailable = (method: string, details: string, answered = false) =>
    new EvoraApiError({ code: 14, details, method, cause: answered ? { metadata: { getMap: () => ({ 'content-type': 'application/grpc' }) } } : undefined });
  it('a submit the server refused on the submit stream (answered: true, no grpc-js metadata) reads "answered", not "lost the connection"', () => {
    const refused = new EvoraApiError({ code: 14, details: 'database read-only: cannot execute INSERT in a read-only transaction', method: 'SubmitJob', answered: true });
    expect(unavailableText(refused, 'db1:50051')).toBe(
      'the Evora server at db1:50051 answered: database read-only: cannot execute INSERT in a read-only transaction; the job may have been submitted',
    );
  });

  it('"cannot reach" only for a call that never got a connection; a write the server may have applied (answered, or the connection lost during the call) says so', () => {
    const refused = 'No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1.';
    expect(unavailableText(unavailable('PurgeJobs', refused), 'db1:50051')).toBe(`cannot reach the Evora server at db1:50051 (${refused})`);
    expect(unavailableText(unavailable('PauseQueue', 'Name resolution failed for target dns:x.invalid:1'), 'x.invalid:1', 'billing')).toBe(
      'cannot reach the Evora server at x.invalid:1 (Name resolution failed for target dns:x.invalid:1)',
    );
    // The server was killed while a purge ran: the batches it committed stay deleted.
    expect(unavailableText(unavailable('PurgeJobs', 'Connection dropped'), 'db1:50051', undefined, { address: 'db1' })).toBe(
      'lost the connection to the Evora server at db1:50051 during the call (Connection dropped); the purge stopped there with none, some or all of the ' +
        'matching jobs deleted (the batches it committed stay deleted): run it again once the server is back to go on, or check with evora --address db1 ' +
        'purge --dry-run and the same filters (it counts the jobs still to delete)',
    );
    expect(unavailableText(unavailable('RetryJobs', 'database unavailable: terminating connection', true), 'db1:50051')).toMatch(
      /^the Evora server at db1:50051 answered: database unavailable: terminating connection; the retry stopped there with none, some or all of the matching jobs retried /,
    );
    expect(unavailableText(unavailable('PauseQueue', 'Connection dropped'), 'db1:50051', 'billing')).toBe(
      'lost the connection to the Evora server at db1:50051 during the call (Connection dropped); the pause may or may not have been applied: check with evora queue get billing',
    );
    // A submit lost mid-call says whether the job may have gone out, as after a deadline.
    expect(unavailableText(unavailable('SubmitJob', 'Connection dropped'), 'db1:50051')).toBe(
      'lost the connection to the Evora server at db1:50051 during the call (Connection dropped); the job may have been submitted',
    );
    expect(unavailableText(unavailable('SubmitJob', 'database unavailable: terminating connection', true), 'db1:50051')).toBe(
      'the Evora server at db1:50051 answered: database unavailable: terminating connection; the job may have been submitted',
    );
    expect(unavailableText(new EvoraApiError({ code: 14, details: 'Connection dropped', method: 'SubmitJob', notSent: true }), 'db1:50051')).toMatch(/; the job was not submitted$/);
    // A read says nothing more.
    expect(unavailableText(unavailable('ListQueues', 'the server is starting: waiting for the database', true), 'db1:50051')).toBe(
      'the Evora server at db1:50051 answered: the server is starting: waiting for the database',
    );
  });
});
