import { describe, expect, it } from 'vitest';
import { fields } from '../../src/cli/format.js';

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
