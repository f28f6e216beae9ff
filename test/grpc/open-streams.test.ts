import { describe, expect, it } from 'vitest';
import { OpenStreams } from '../../src/grpc/open-streams.js';

/** OpenStreams: shutdown ends every open stream, and each one that opens afterwards at once. */
describe('OpenStreams', () => {
  const stream = () => {
    const s = { ended: 0, end: () => void s.ended++ };
    return s;
  };

  it('endAll ends the open streams, not the closed ones, and ends later arrivals as they are added', () => {
    const streams = new OpenStreams();
    const a = stream();
    const b = stream();
    const closed = stream();
    streams.add(a);
    streams.add(b);
    streams.add(closed);
    streams.delete(closed);
    expect(streams.size).toBe(2);
    expect([a.ended, b.ended]).toEqual([0, 0]);
    streams.endAll();
    expect([a.ended, b.ended, closed.ended]).toEqual([1, 1, 0]);
    const late = stream();
    streams.add(late);
    expect(late.ended).toBe(1);
  });

  it('a stream that leaves the set while being ended does not disturb the others', () => {
    const streams = new OpenStreams();
    const all = Array.from({ length: 3 }, () => {
      const s = { ended: 0, end: () => { s.ended++; streams.delete(s); } };
      streams.add(s);
      return s;
    });
    streams.endAll();
    expect(all.map((s) => s.ended)).toEqual([1, 1, 1]);
    expect(streams.size).toBe(0);
  });
});
