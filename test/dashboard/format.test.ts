import { describe, expect, it } from 'vitest';
import { bulkOutcome, outboxLagText } from '../../dashboard/src/format.js';

/** The dashboard's pure formatting: no server, no browser. */
describe('dashboard formatting', () => {
  it('the telemetry lag says "about" when the server estimated it, and counts with the plural rule', () => {
    expect(outboxLagText('0', false)).toBe('0 events');
    expect(outboxLagText('1', undefined)).toBe('1 event');
    expect(outboxLagText('1843', true)).toBe('about 1843 events');
    expect(outboxLagText(undefined, undefined)).toBe('0 events');
  });

  it('a confirmed bulk action says how its count differs from the one it was confirmed on', () => {
    expect(bulkOutcome('Retried', '3', '3')).toBe('Retried 3 jobs');
    expect(bulkOutcome('Retried', '1', undefined)).toBe('Retried 1 job');
    expect(bulkOutcome('Purged', undefined, '2')).toBe('Purged 0 of the 2 jobs counted: the other 2 changed meanwhile or were busy; count again to see what is left');
    expect(bulkOutcome('Retried', '2', '3')).toBe('Retried 2 of the 3 jobs counted: the other 1 changed meanwhile or was busy; count again to see what is left');
    expect(bulkOutcome('Purged', '38', '37')).toBe('Purged 38 jobs, 1 more than the 37 counted: it finished just as the count was made');
  });
});
