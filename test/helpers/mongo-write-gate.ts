import { createServer, connect, type Server, type Socket } from 'node:net';

/** The MongoDB wire protocol's OP_MSG, the one message kind the driver sends. */
const OP_MSG = 2013;
/** Commands that change documents. */
const WRITE_COMMANDS = new Set(['insert', 'update', 'delete']);

/**
 * A TCP relay between the mongodb driver and a MongoDB-protocol server (FerretDB) that can
 * stop passing write commands after a given number, so a test can kill the server with
 * SIGKILL at an exact point in the middle of a projector batch: the writes before that
 * point have been answered, the held one never reaches the server. Nothing in it changes
 * a byte: messages pass whole or not at all.
 */
export interface MongoWriteGate {
  /** `mongodb://127.0.0.1:PORT/` of the relay; append a database name. */
  url: string;
  /**
   * Lets `n` more write commands through, then holds the next one and everything after it.
   * Resolves when a command is held.
   */
  holdAfterWrites(n: number): Promise<void>;
  /** Drops every connection (as the server's death does) and lets everything through again. */
  reset(): void;
  close(): Promise<void>;
}

/** The command name of an OP_MSG frame (the first key of its body), or null. */
function commandName(frame: Buffer): string | null {
  if (frame.readInt32LE(12) !== OP_MSG) return null;
  let at = 20; // header (16) + flag bits (4)
  while (at < frame.length) {
    const kind = frame[at]!;
    if (kind === 0) {
      // A BSON document: int32 length, then the first element's type byte and its name.
      const nameStart = at + 1 + 4 + 1;
      return frame.toString('utf8', nameStart, frame.indexOf(0, nameStart));
    }
    at += 1 + frame.readInt32LE(at + 1); // kind 1: a document sequence with its own size
  }
  return null;
}

/** Starts a relay on a free port of 127.0.0.1 to the server on `targetPort`. */
export async function mongoWriteGateStart(targetPort: number): Promise<MongoWriteGate> {
  const sockets = new Set<Socket>();
  let budget: number | null = null;
  let holding = false;
  let onHeld: (() => void) | null = null;

  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    upstream.pipe(client);
    let pending = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= pending.readInt32LE(0)) {
        const size = pending.readInt32LE(0);
        const frame = pending.subarray(0, size);
        pending = pending.subarray(size);
        if (!holding && budget !== null && WRITE_COMMANDS.has(commandName(frame) ?? '')) {
          if (budget === 0) {
            holding = true;
            onHeld?.();
          } else budget--;
        }
        if (!holding) upstream.write(frame);
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  return {
    url: `mongodb://127.0.0.1:${port}/`,
    holdAfterWrites: (n) =>
      new Promise<void>((resolve) => {
        budget = n;
        holding = false;
        onHeld = resolve;
      }),
    reset: () => {
      for (const s of sockets) s.destroy();
      budget = null;
      holding = false;
      onHeld = null;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
