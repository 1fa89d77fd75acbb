import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../packages/executor/src/log.js';

/**
 * The in-process stand-in for Pub/Sub + Eventarc when no emulator is installed. Topics live in memory;
 * other processes publish over HTTP with the Pub/Sub REST shape (`POST /v1/projects/P/topics/T:publish`,
 * `{messages: [{data, attributes, orderingKey}]}`), which is what `PUBSUB_BRIDGE_URL` points the
 * publishers at. Each subscription delivers binary-mode CloudEvents to its target with the production
 * semantics that matter: ack on 2xx, redelivery with backoff otherwise, dead-lettering after N attempts,
 * and one message at a time per ordering key. Nothing survives a restart, unlike the emulator.
 */
export interface MemoryBridge {
  url: string;
  delivered: number;
  deadLettered: Array<{ topic: string; messageId: string; attempts: number }>;
  publish(topic: string, json: unknown, attributes: Record<string, string>, orderingKey?: string): Promise<string>;
  subscribe(topic: string, name: string, targetUrl: string, opts: { deadLetterTopic?: string; maxDeliveryAttempts?: number }): void;
  close(): Promise<void>;
}

interface StoredMessage {
  id: string;
  data: string; // base64
  attributes: Record<string, string>;
  orderingKey: string | undefined;
  publishTime: string;
}

interface Subscription {
  name: string;
  topic: string;
  targetUrl: string;
  deadLetterTopic: string | undefined;
  maxDeliveryAttempts: number;
  /** Per ordering key, the tail of the delivery chain. */
  chains: Map<string, Promise<void>>;
}

const BACKOFF_MS = [200, 1_000, 2_000, 4_000, 8_000, 10_000];

export async function startMemoryBridge(o: { project: string; logger: Logger; host?: string }): Promise<MemoryBridge> {
  const controller = new AbortController();
  const pending = new Set<Promise<void>>();
  const bridge: MemoryBridge = {
    url: '',
    delivered: 0,
    deadLettered: [],
    publish: (topic, json, attributes, orderingKey) =>
      Promise.resolve(enqueue(state, topic, { data: Buffer.from(JSON.stringify(json)).toString('base64'), attributes, orderingKey })),
    subscribe: (topic, name, targetUrl, opts) => {
      const list = state.subs.get(topic) ?? [];
      list.push({
        name,
        topic,
        targetUrl,
        deadLetterTopic: opts.deadLetterTopic,
        maxDeliveryAttempts: opts.maxDeliveryAttempts ?? 5,
        chains: new Map(),
      });
      state.subs.set(topic, list);
    },
    close: async () => {
      controller.abort();
      await new Promise<void>((r) => server.close(() => r()));
      await Promise.allSettled([...pending]);
    },
  };
  const state: BridgeState = {
    project: o.project,
    log: o.logger.child({ bridge: 'in-process' }),
    subs: new Map(),
    signal: controller.signal,
    pending,
    bridge,
  };

  const server = publishServer((topic, m) => enqueue(state, topic, m));
  await new Promise<void>((resolve) => server.listen(0, o.host ?? '127.0.0.1', () => resolve()));
  bridge.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return bridge;
}

/** What the bridge's deliveries share: its subscriptions, its close signal, the deliveries under way. */
interface BridgeState {
  project: string;
  log: Logger;
  subs: Map<string, Subscription[]>;
  signal: AbortSignal;
  pending: Set<Promise<void>>;
  bridge: MemoryBridge;
}

type NewMessage = { data: string; attributes: Record<string, string>; orderingKey: string | undefined };

function enqueue(state: BridgeState, topic: string, m: NewMessage): string {
  const msg: StoredMessage = { id: randomUUID(), publishTime: new Date().toISOString(), ...m };
  for (const sub of state.subs.get(topic) ?? []) {
    // Without an ordering key every message gets its own chain, so they run concurrently.
    const key = msg.orderingKey || msg.id;
    const prev = sub.chains.get(key) ?? Promise.resolve();
    const next = prev.then(() => deliver(state, sub, msg));
    sub.chains.set(key, next);
    state.pending.add(next);
    void next.finally(() => {
      state.pending.delete(next);
      if (sub.chains.get(key) === next) sub.chains.delete(key);
    });
  }
  return msg.id;
}

/** Push delivery with redelivery and backoff until a 2xx, then the dead-letter topic. */
async function deliver(state: BridgeState, sub: Subscription, msg: StoredMessage): Promise<void> {
  const { log, signal, bridge } = state;
  for (let attempt = 1; attempt <= sub.maxDeliveryAttempts; attempt++) {
    if (signal.aborted) return;
    try {
      const res = await fetch(sub.targetUrl, {
        method: 'POST',
        ...cloudEvent(state.project, sub, msg, attempt),
        signal: AbortSignal.any([signal, AbortSignal.timeout(60_000)]),
      });
      await res.arrayBuffer().catch(() => undefined);
      if (res.ok) {
        bridge.delivered += 1;
        return;
      }
      log.debug('delivery failed; will redeliver', { status: res.status, messageId: msg.id, attempt });
    } catch (err) {
      if (signal.aborted) return;
      log.debug('delivery errored; will redeliver', { err, messageId: msg.id, attempt });
    }
    if (attempt < sub.maxDeliveryAttempts) await sleep(BACKOFF_MS[Math.min(attempt - 1, BACKOFF_MS.length - 1)] ?? 10_000, signal);
  }
  bridge.deadLettered.push({ topic: sub.topic, messageId: msg.id, attempts: sub.maxDeliveryAttempts });
  log.warn('message dead-lettered after its delivery attempts', {
    event: 'dead_letter',
    subscription: sub.name,
    messageId: msg.id,
    attempts: sub.maxDeliveryAttempts,
  });
  if (sub.deadLetterTopic) {
    enqueue(state, sub.deadLetterTopic, {
      data: msg.data,
      attributes: {
        ...msg.attributes,
        CloudPubSubDeadLetterSourceDeliveryCount: String(sub.maxDeliveryAttempts),
        CloudPubSubDeadLetterSourceSubscription: sub.name,
      },
      orderingKey: undefined,
    });
  }
}

/** A binary-mode CloudEvent carrying a Pub/Sub push body, as Eventarc delivers one. */
function cloudEvent(
  project: string,
  sub: Subscription,
  msg: StoredMessage,
  attempt: number,
): { headers: Record<string, string>; body: string } {
  return {
    headers: {
      'content-type': 'application/json',
      'ce-id': msg.id,
      'ce-specversion': '1.0',
      'ce-type': 'google.cloud.pubsub.topic.v1.messagePublished',
      'ce-source': `//pubsub.googleapis.com/projects/${project}/topics/${sub.topic}`,
      'ce-time': msg.publishTime,
    },
    body: JSON.stringify({
      message: {
        data: msg.data,
        attributes: msg.attributes,
        messageId: msg.id,
        publishTime: msg.publishTime,
        ...(msg.orderingKey ? { orderingKey: msg.orderingKey } : {}),
      },
      subscription: `projects/${project}/subscriptions/${sub.name}`,
      deliveryAttempt: attempt,
    }),
  };
}

/** The Pub/Sub REST publish endpoint, for publishers in other processes. */
function publishServer(enqueueOn: (topic: string, m: NewMessage) => string): Server {
  return createServer((req, res) => {
    void (async () => {
      const match = /^\/v1\/projects\/[^/]+\/topics\/([^/:]+):publish$/.exec(req.url ?? '');
      if (req.method !== 'POST' || !match?.[1]) {
        res.writeHead(404).end();
        return;
      }
      const topic = decodeURIComponent(match[1]);
      try {
        const body = JSON.parse(await readBody(req)) as {
          messages?: Array<{ data?: string; attributes?: Record<string, string>; orderingKey?: string }>;
        };
        const messages = body.messages ?? [];
        if (messages.length === 0 || messages.some((m) => !m.data && !m.attributes)) throw new Error('a message needs data or attributes');
        const messageIds = messages.map((m) =>
          enqueueOn(topic, { data: m.data ?? '', attributes: m.attributes ?? {}, orderingKey: m.orderingKey }),
        );
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ messageIds }));
      } catch (err) {
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 400, message: String(err) } }));
      }
    })();
  });
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > 1024 * 1024) throw new Error('request body too large');
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}
