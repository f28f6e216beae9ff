import { describe, expect, it } from 'vitest';
import { outboxLagText } from '../../dashboard/src/format.js';

/** The dashboard's pure formatting: no server, no browser. */
describe('dashboard formatting', () => {
  it('the telemetry lag says "about" when the server estimated it, and counts with the plural rule', () => {
    expect(outboxLagText('0', false)).toBe('0 events');
    expect(outboxLagText('1', undefined)).toBe('1 event');
    expect(outboxLagText('1843', true)).toBe('about 1843 events');
    expect(outboxLagText(undefined, undefined)).toBe('0 events');
  });
});
