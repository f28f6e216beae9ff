import { createServer, connect, type Server, type Socket } from 'node:net';
import { teardownAdd } from './teardown.js';

/**
 * A TCP proxy on 127.0.0.1 in front of a PostgreSQL, for network faults between a server
 * and its database that no process kill can make: `blackhole()` stops every byte in both
 * directions while every socket stays open (a partition, a firewall that drops packets, a
 * host gone without a reset: nobody is told anything), `resume()` lets them through again
 * (what TCP's retransmission does when the path comes back: what was sent meanwhile
 * arrives late), `reset()` ends every connection with a reset (what either end's kernel
 * does once it gives up), after which new connections pass. While blackholed, a new
 * connection is accepted (a dropped SYN would time out the same way, later) but nothing
 * it sends goes on until the path comes back. Closed by the file's teardown.
 */
export interface BlackholeProxy {
  port: number;
  /** `url` (a URL of the PostgreSQL behind) through the proxy. */
  through(url: string): string;
  blackhole(): void;
  resume(): void;
  /** Ends every connection with a reset (RST both ways) and lets new ones through. */
  reset(): void;
  /** Connections open through the proxy now. */
  connections(): number;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket | null;
  /** One end closed or failed while blackholed: the other goes when the path comes back. */
  ended: boolean;
}

/** Starts a proxy to `port` on 127.0.0.1; it forwards until told otherwise. */
export async function blackholeProxy(targetPort: number): Promise<BlackholeProxy> {
  const pairs = new Set<Pair>();
  let holed = false;

  const end = (pair: Pair) => {
    pair.ended = true;
    if (holed) return;
    pair.client.destroy();
    pair.upstream?.destroy();
    pairs.delete(pair);
  };
  /** Forwards `from` to `to`, pausing `from` while `to` is full; nothing moves while blackholed. */
  const forward = (pair: Pair, from: Socket, to: Socket) => {
    from.on('data', (chunk: Buffer) => {
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => {
          if (!holed) from.resume();
        });
      }
    });
    from.on('end', () => end(pair));
    from.on('close', () => end(pair));
    from.on('error', () => end(pair));
  };
  const plumb = (pair: Pair) => {
    const upstream = connect(targetPort, '127.0.0.1');
    upstream.setNoDelay(true);
    pair.upstream = upstream;
    forward(pair, pair.client, upstream);
    forward(pair, upstream, pair.client);
    if (holed) upstream.pause();
    else pair.client.resume();
  };

  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    client.setNoDelay(true);
    const pair: Pair = { client, upstream: null, ended: false };
    pairs.add(pair);
    // The client's bytes wait in its socket (paused) until there is somewhere to send them.
    if (!holed) plumb(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  const self: BlackholeProxy = {
    port,
    through(url) {
      const u = new URL(url);
      u.host = `127.0.0.1:${port}`;
      return u.toString();
    },
    blackhole() {
      holed = true;
      for (const p of pairs) {
        p.client.pause();
        p.upstream?.pause();
      }
    },
    resume() {
      holed = false;
      for (const p of [...pairs]) {
        if (p.ended) {
          end(p);
          continue;
        }
        if (p.upstream) {
          p.client.resume();
          p.upstream.resume();
        } else {
          plumb(p);
        }
      }
    },
    reset() {
      holed = false;
      for (const p of [...pairs]) {
        p.client.resetAndDestroy();
        p.upstream?.resetAndDestroy();
        pairs.delete(p);
      }
    },
    connections: () => [...pairs].filter((p) => !p.ended).length,
    async close() {
      self.reset();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  teardownAdd(() => self.close());
  return self;
}
