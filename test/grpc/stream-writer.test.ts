import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { StreamWriter } from '../../src/grpc/stream-writer.js';

/**
 * StreamWriter over a real Node Writable whose consumer is held back by hand (as HTTP/2
 * flow control holds a gRPC stream), so the test decides when the peer "reads".
 */
function setup(highWaterMark = 2, writerOpts: { highWaterMark?: number; sizeOf?: (m: string) => number } = {}) {
  const written: string[] = [];
  const held: (() => void)[] = [];
  const sink = new Writable({
    objectMode: true,
    highWaterMark,
    write(chunk: string, _enc, cb) {
      written.push(chunk);
      held.push(() => cb());
    },
  });
  const blocked: boolean[] = [];
  const closing = new AbortController();
  const writer = new StreamWriter<string>(sink, { signal: closing.signal, onBlocked: (b) => blocked.push(b), ...writerOpts });
  /** The peer reads everything written so far (and what that lets through), until nothing is held. */
  const readAll = async () => {
    while (held.length > 0) {
      held.shift()!();
      await new Promise((r) => setImmediate(r));
    }
  };
  return { sink, writer, written, blocked, closing, readAll };
}

describe('StreamWriter', () => {
  it('queues once write() says the buffer is full, hands over in order on drain, and says when it blocks and flows', async () => {
    const { writer, written, blocked, readAll } = setup();
    for (let i = 0; i < 10; i++) writer.write(`m${i}`);
    expect(writer.state).toBe('blocked');
    expect(blocked).toEqual([true]);
    expect(writer.queued).toBeGreaterThan(0);
    await readAll();
    expect(written).toEqual(Array.from({ length: 10 }, (_, i) => `m${i}`));
    expect(writer.state).toBe('flowing');
    expect(blocked).toEqual([true, false]);
  });

  it('below its high-water mark it queues without blocking; past it, it blocks until everything queued has gone', async () => {
    const { writer, written, blocked, readAll } = setup(2, { highWaterMark: 3 });
    for (let i = 0; i < 5; i++) writer.write(`m${i}`); // 2 taken by the stream, 3 queued here
    expect(writer.state).toBe('queueing');
    expect(writer.queued).toBe(3);
    expect(blocked).toEqual([]);
    await readAll();
    expect(writer.state).toBe('flowing');
    expect(blocked).toEqual([]); // never told: never blocked
    for (let i = 5; i < 11; i++) writer.write(`m${i}`); // 2 taken, 4 queued: past the mark
    expect(writer.state).toBe('blocked');
    expect(blocked).toEqual([true]);
    await readAll();
    expect(written).toEqual(Array.from({ length: 11 }, (_, i) => `m${i}`));
    expect(writer.state).toBe('flowing');
    expect(blocked).toEqual([true, false]);
  });

  it('weighs queued messages with sizeOf', () => {
    const { writer, blocked } = setup(1, { highWaterMark: 10, sizeOf: (m) => m.length });
    writer.write('taken by the stream');
    writer.write('12345');
    writer.write('123456');
    expect(writer.queuedSize).toBe(5 + 6);
    expect(writer.state).toBe('blocked');
    expect(blocked).toEqual([true]);
  });

  it('end() while queueing ends the stream after the queued messages', async () => {
    const { sink, writer, written, readAll } = setup(2, { highWaterMark: 100 });
    for (let i = 0; i < 5; i++) writer.write(`m${i}`);
    expect(writer.state).toBe('queueing');
    writer.end();
    expect(writer.state).toBe('ending');
    await readAll();
    expect(written).toHaveLength(5);
    expect(writer.state).toBe('ended');
    expect(sink.writableEnded).toBe(true);
  });

  it('end() while blocked ends the stream after the queued messages', async () => {
    const { sink, writer, written, readAll } = setup();
    for (let i = 0; i < 5; i++) writer.write(`m${i}`);
    writer.end();
    expect(writer.state).toBe('ending');
    expect(sink.writableEnded).toBe(false);
    await readAll();
    expect(written).toHaveLength(5);
    expect(writer.state).toBe('ended');
    expect(sink.writableEnded).toBe(true);
    expect(() => writer.write('late')).toThrow(/write after end/);
  });

  it('the signal discards what is queued and ignores later writes', async () => {
    const { writer, written, closing, readAll } = setup();
    for (let i = 0; i < 5; i++) writer.write(`m${i}`);
    closing.abort();
    expect(writer.state).toBe('closed');
    expect(writer.queued).toBe(0);
    writer.write('after');
    await readAll();
    // Only what the stream itself had taken (its buffer of 2) went out; nothing queued here.
    expect(written).toEqual(['m0', 'm1']);
  });
});
