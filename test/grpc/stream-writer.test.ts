import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { StreamWriter } from '../../src/grpc/stream-writer.js';

/**
 * StreamWriter over a real Node Writable whose consumer is held back by hand (as HTTP/2
 * flow control holds a gRPC stream), so the test decides when the peer "reads".
 */
function setup(highWaterMark = 2) {
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
  const writer = new StreamWriter<string>(sink, { signal: closing.signal, onBlocked: (b) => blocked.push(b) });
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
