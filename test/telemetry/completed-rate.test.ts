import { describe, expect, it } from 'vitest';
import { completedRate, type MinuteDelta } from '../../src/telemetry/projection.js';

/** A minute bucket of queue q starting at `minute` (ISO) with `completed` completions. */
function bucket(minute: string, completed: number): MinuteDelta {
  return { queue: 'q', minute: new Date(minute), submitted: 0, completed, failed: 0, deadLettered: 0, wait: {}, run: {} };
}

describe('completedRate', () => {
  it('reads a steady rate the same at every second of a minute, also just after a minute begins', () => {
    // One completion per second, steadily: 60 in each full minute, `s` so far in 12:01.
    for (const s of [0.1, 1, 15, 30, 59.9]) {
      const minutes = [bucket('2026-01-01T11:58:00Z', 60), bucket('2026-01-01T11:59:00Z', 60), bucket('2026-01-01T12:00:00Z', 60), bucket('2026-01-01T12:01:00Z', s)];
      const now = new Date(Date.parse('2026-01-01T12:01:00Z') + s * 1000);
      expect(completedRate(minutes, now, 1), `1m at :${s}`).toBeCloseTo(1, 9);
      // The 5-minute window starts before the oldest bucket: only what exists is counted.
      expect(completedRate(minutes, now, 5), `5m at :${s}`).toBeCloseTo((180 + s) / 300, 9);
    }
  });

  it('counts the bucket the window starts in by the share of its minute inside the window, and nothing older', () => {
    const minutes = [bucket('2026-01-01T11:50:00Z', 1000), bucket('2026-01-01T11:59:00Z', 30), bucket('2026-01-01T12:00:00Z', 6)];
    const now = new Date('2026-01-01T12:00:20Z');
    // Window 11:59:20-12:00:20: two thirds of 11:59's 30, all of 12:00's 6.
    expect(completedRate(minutes, now, 1)).toBeCloseTo((20 + 6) / 60, 9);
    expect(completedRate([], now, 1)).toBe(0);
  });
});
