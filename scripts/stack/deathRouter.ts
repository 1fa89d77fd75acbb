import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../packages/executor/src/log.js';

/**
 * One push endpoint for the stack's death notices, in front of one executorDeath per guarded application
 * (scripts/stack/guardAll.ts). A deployed executorDeath guards one application and acks another's notice as
 * poison (functions/executorDeath/handle.ts), so with several applications in one local database each
 * notice must reach its own application's function: the router reads `applicationName` from the push
 * body's `message.data` (the emulator's raw push body and the bridge's CloudEvent carry the same body) and
 * forwards the request unchanged — path, CloudEvent headers, body — relaying the function's status, so
 * ack/nack and redelivery stay Pub/Sub's.
 *
 * A notice for an application the stack does not guard yet asks the guard to look (its kits may have just
 * registered) and is nacked (503) while that application's functions start, so it is redelivered to them;
 * one for an application with no kit here goes to the first application's function, which acks it as
 * poison with its usual warning, as a deployed plane would.
 */
export interface DeathRouter {
  url: string;
  close(): Promise<void>;
}

export interface RouteTargets {
  /** The executorDeath base URL serving `applicationName`, if it is up. */
  urlFor(applicationName: string): string | undefined;
  /** Whether the stack will guard it (it is starting, or its kits are registered): nack and wait. */
  coming(applicationName: string): Promise<boolean>;
  /** Where a notice for nobody's application goes (the first application's executorDeath). */
  fallbackUrl: string;
}

const FORWARDED_HEADERS = /^(content-type|ce-.*|traceparent|tracestate|authorization)$/i;

export async function startDeathRouter(targets: RouteTargets, logger: Logger): Promise<DeathRouter> {
  const log = logger.child({ router: 'death-notices' });
  const server: Server = createServer((req, res) => {
    void (async () => {
      try {
        const body = await readBody(req);
        const app = applicationOf(body);
        const own = app === undefined ? undefined : targets.urlFor(app);
        if (own === undefined && app !== undefined && (await targets.coming(app))) {
          res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `functions for ${app} starting` }));
          return;
        }
        const base = own ?? targets.fallbackUrl;
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && FORWARDED_HEADERS.test(k)) headers[k] = v;
        const answer = await fetch(`${base.replace(/\/$/, '')}${req.url ?? '/'}`, {
          method: req.method ?? 'POST',
          headers,
          body,
          signal: AbortSignal.timeout(120_000),
        });
        const text = await answer.text();
        res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' }).end(text);
      } catch (err) {
        // The function was unreachable: a nack, so Pub/Sub redelivers (as when a Cloud Run function is down).
        log.debug('forwarding a death notice failed; nacked for redelivery', { err });
        if (!res.headersSent) res.writeHead(502).end();
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive sockets of the emulator or the bridge would hold close() open; the functions stop next anyway.
        server.closeAllConnections();
      }),
  };
}

/** The notice's application, or undefined when the body is not a push body carrying one (left to the function to judge). */
export function applicationOf(body: string): string | undefined {
  try {
    const push = JSON.parse(body) as { message?: { data?: unknown } };
    if (typeof push.message?.data !== 'string') return undefined;
    const notice = JSON.parse(Buffer.from(push.message.data, 'base64').toString('utf8')) as { applicationName?: unknown };
    return typeof notice.applicationName === 'string' && notice.applicationName !== '' ? notice.applicationName : undefined;
  } catch {
    return undefined;
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      // A death notice is a few hundred bytes; Pub/Sub's own message limit is 10 MB.
      if (size > 10 * 1024 * 1024) req.destroy(new Error('push body too large'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
