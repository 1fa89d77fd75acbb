import { createServer, type Server, Socket } from 'node:net';

/**
 * A TCP forwarder that opens its own connection to Postgres for every client, as Cloud SQL's server-side
 * proxy, the Cloud SQL connector and the Auth Proxy do — a stand-in for them (they cannot run here). On
 * `vanish()` it stops piping every client connection in both directions, and from then on keeps each
 * Postgres leg open forever, whatever the client side does: the victim's host is gone, no FIN or RST ever
 * reaches Postgres, and the server sees an idle session on a healthy TCP connection (its keepalives are
 * answered by this process's kernel). That is the failure the liveness lease exists for (issue 19).
 * New connections after a vanish are accepted and never answered (an unreachable host's SYNs go nowhere).
 *
 * Shared by bench/vanish.ts and the integration tests (compiled with the bench: tsconfig.build.json).
 */
export interface Forwarder {
  /** host:port clients connect to. */
  readonly port: number;
  /** A Postgres URL like `url`, through this forwarder. */
  via(url: string): string;
  /** Stops piping every connection both ways; Postgres legs stay open until `close()`. */
  vanish(): void;
  readonly vanished: boolean;
  /** Connections currently piped (or held, after a vanish). */
  readonly connections: number;
  /** Destroys everything, Postgres legs included. */
  close(): Promise<void>;
}

export async function startForwarder(target: { host: string; port: number }): Promise<Forwarder> {
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  let vanished = false;
  const server: Server = createServer((client) => {
    client.on('error', () => undefined);
    if (vanished) {
      // Held, unanswered, until close().
      const upstream = new Socket();
      pairs.add({ client, upstream });
      client.pause();
      return;
    }
    const upstream = new Socket();
    const pair = { client, upstream };
    pairs.add(pair);
    upstream.on('error', () => undefined);
    upstream.connect(target.port, target.host);
    upstream.setNoDelay(true);
    client.setNoDelay(true);
    // Manual piping, so that a vanish cuts both directions at once and nothing is ever forwarded again.
    client.on('data', (d: Buffer) => {
      if (!vanished) upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (!vanished) client.write(d);
    });
    client.on('close', () => {
      if (vanished) return;
      upstream.destroy();
      pairs.delete(pair);
    });
    upstream.on('close', () => {
      if (vanished) return;
      client.destroy();
      pairs.delete(pair);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('forwarder: no TCP address');
  const port = address.port;
  return {
    port,
    via: (url) => {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    vanish: () => {
      vanished = true;
      for (const { client, upstream } of pairs) {
        client.pause();
        upstream.pause();
      }
    },
    get vanished() {
      return vanished;
    },
    get connections() {
      return pairs.size;
    },
    close: async () => {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
