/**
 * What one hop between two Node processes on this machine costs, by transport: a raw TCP
 * socket, Node's HTTP/2, a grpc-js unary call, and a message on an open grpc-js
 * bidirectional stream (as SubmitJobStream carries submits), each to a server process of its
 * own on 127.0.0.1. Measures the one-way time (client send to server handler, on one clock:
 * performance.timeOrigin + now()) and the round trip, with the processes idle between calls
 * (10 ms apart, as in the latency scenario's 100 submits/s) and busy (back to back). Evora's
 * latency path has two such hops (producer -> server unary, server -> worker stream push)
 * where graphile-worker's has PostgreSQL protocol round trips: this is how much each costs.
 *
 * Usage: npx tsx bench/experiments/hop-latency.ts [calls=500]
 * (the server processes are this file with `--server <transport>`)
 */
import { spawn } from 'node:child_process';
import http2 from 'node:http2';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';

type Transport = 'tcp' | 'http2' | 'grpc' | 'grpc-stream';
const now = () => performance.timeOrigin + performance.now();
/** The server stamps when the request reached its handler; the client reads it back. */
const answer = (req: string) => JSON.stringify({ t: (JSON.parse(req) as { t: number }).t, recv: now() });
const passThrough = (b: Buffer) => b;
const ECHO = {
  echo: {
    path: '/hop.Echo/Echo', requestStream: false, responseStream: false,
    requestSerialize: passThrough, requestDeserialize: passThrough, responseSerialize: passThrough, responseDeserialize: passThrough,
  },
  stream: {
    path: '/hop.Echo/Stream', requestStream: true, responseStream: true,
    requestSerialize: passThrough, requestDeserialize: passThrough, responseSerialize: passThrough, responseDeserialize: passThrough,
  },
} as const;

async function serve(transport: Transport): Promise<void> {
  const ready = (port: number) => process.stdout.write(`${port}\n`);
  if (transport === 'tcp') {
    const s = net.createServer((sock) => {
      sock.setNoDelay(true);
      sock.on('data', (d) => sock.write(answer(d.toString())));
    });
    s.listen(0, '127.0.0.1', () => ready((s.address() as net.AddressInfo).port));
  } else if (transport === 'http2') {
    const s = http2.createServer();
    s.on('stream', (stream) => {
      let body = '';
      stream.on('data', (d: Buffer) => (body += d.toString()));
      stream.on('end', () => {
        const out = answer(body);
        stream.respond({ ':status': 200 });
        stream.end(out);
      });
    });
    s.listen(0, '127.0.0.1', () => ready((s.address() as net.AddressInfo).port));
  } else {
    const s = new grpc.Server();
    s.addService(ECHO as unknown as grpc.ServiceDefinition, {
      echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from(answer(call.request.toString()))),
      stream: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => call.on('data', (d: Buffer) => call.write(Buffer.from(answer(d.toString())))),
    });
    s.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (_err, port) => ready(port));
  }
}

/** One client call: resolves to [one-way ms, round-trip ms]. */
async function clientFor(transport: Transport, port: number): Promise<{ call: () => Promise<[number, number]>; close: () => void }> {
  const result = (body: string, t: number): [number, number] => [(JSON.parse(body) as { recv: number }).recv - t, now() - t];
  if (transport === 'tcp') {
    const sock = net.connect(port, '127.0.0.1');
    sock.setNoDelay(true);
    await new Promise((r) => sock.once('connect', r));
    return {
      call: () => new Promise((resolve) => {
        const t = now();
        sock.once('data', (d) => resolve(result(d.toString(), t)));
        sock.write(JSON.stringify({ t }));
      }),
      close: () => sock.destroy(),
    };
  }
  if (transport === 'http2') {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    return {
      call: () => new Promise((resolve) => {
        const t = now();
        const req = session.request({ ':method': 'POST', ':path': '/' });
        let body = '';
        req.on('data', (d: Buffer) => (body += d.toString()));
        req.on('end', () => resolve(result(body, t)));
        req.end(JSON.stringify({ t }));
      }),
      close: () => session.close(),
    };
  }
  const Client = grpc.makeGenericClientConstructor(ECHO as unknown as grpc.ServiceDefinition, 'Echo');
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as {
    echo(req: Buffer, cb: (err: Error | null, res: Buffer) => void): void;
    stream(): grpc.ClientDuplexStream<Buffer, Buffer>;
    close(): void;
  };
  if (transport === 'grpc-stream') {
    const st = client.stream();
    st.on('error', () => undefined); // the server process is killed at the end
    return {
      call: () => new Promise((resolve) => {
        const t = now();
        st.once('data', (d: Buffer) => resolve(result(d.toString(), t)));
        st.write(Buffer.from(JSON.stringify({ t })));
      }),
      close: () => {
        st.cancel();
        client.close();
      },
    };
  }
  return {
    call: () => new Promise((resolve, reject) => {
      const t = now();
      client.echo(Buffer.from(JSON.stringify({ t })), (err, res) => (err ? reject(err) : resolve(result(res.toString(), t))));
    }),
    close: () => client.close(),
  };
}

const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor(p * (xs.length - 1))]!;

if (process.argv[2] === '--server') {
  await serve(process.argv[3] as Transport);
} else {
  const CALLS = Number(process.argv[2] ?? 500);
  const rows: Record<string, string | number>[] = [];
  for (const transport of ['tcp', 'http2', 'grpc', 'grpc-stream'] as const) {
    const child = spawn(process.execPath, ['--import', 'tsx', new URL(import.meta.url).pathname, '--server', transport], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const port = Number(await new Promise<string>((r) => child.stdout!.once('data', (d: Buffer) => r(d.toString().trim()))));
      const client = await clientFor(transport, port);
      for (let i = 0; i < 50; i++) await client.call(); // warm up
      for (const pace of ['idle (10 ms apart)', 'busy (back to back)'] as const) {
        const oneWay: number[] = [];
        const roundTrip: number[] = [];
        for (let i = 0; i < CALLS; i++) {
          const [o, r] = await client.call();
          oneWay.push(o);
          roundTrip.push(r);
          if (pace.startsWith('idle')) await new Promise((r) => setTimeout(r, 10));
        }
        rows.push({
          transport, pace,
          'one-way p50 ms': +q(oneWay, 0.5).toFixed(3), 'one-way p90 ms': +q(oneWay, 0.9).toFixed(3),
          'round trip p50 ms': +q(roundTrip, 0.5).toFixed(3), 'round trip p90 ms': +q(roundTrip, 0.9).toFixed(3),
        });
      }
      client.close();
    } finally {
      child.kill();
    }
  }
  console.table(rows);
}
