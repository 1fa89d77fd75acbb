import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpBridgePublisher } from '../../../packages/executor/src/events/publisher.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { type MemoryBridge, startMemoryBridge } from '../../../scripts/stack/memoryBridge.js';
import { waitFor } from '../../helpers/db.js';

/**
 * The in-process bridge that replaces the emulator in `npm start` on machines without one: publishes over
 * HTTP in the Pub/Sub REST shape, delivers binary-mode CloudEvents to a real HTTP target, redelivers on
 * non-2xx and on a refused connection, dead-letters after the attempts, and keeps one ordering key in order.
 */
interface Seen {
  headers: IncomingMessage['headers'];
  body: {
    message: { data: string; attributes: Record<string, string>; messageId: string; orderingKey?: string };
    subscription: string;
    deliveryAttempt: number;
  };
}

describe('in-process Pub/Sub bridge', () => {
  let bridge: MemoryBridge;
  let target: Server;
  let url: string;
  const seen: Seen[] = [];
  // Data of each message in the order the target finished handling it (answered 2xx).
  const acked: string[] = [];
  // Per message data: how many deliveries to fail before answering 204 (Infinity = always fail).
  const failFirst = new Map<string, number>();
  const logger = memoryLogger();

  beforeAll(async () => {
    target = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const body = JSON.parse(raw) as Seen['body'];
        seen.push({ headers: req.headers, body });
        const key = Buffer.from(body.message.data, 'base64').toString();
        const left = failFirst.get(key) ?? 0;
        if (left > 0) {
          failFirst.set(key, left - 1);
          res.writeHead(500).end('nope');
        } else {
          // A slow first message of an ordering key must still be delivered before the next one.
          setTimeout(
            () => {
              acked.push(key);
              res.writeHead(204).end();
            },
            key === '"ordered-1"' ? 300 : 0,
          );
        }
      });
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
    bridge = await startMemoryBridge({ project: 'p', logger });
    bridge.subscribe('t', 'sub', url, { deadLetterTopic: 't-dlq', maxDeliveryAttempts: 3 });
  });
  afterAll(async () => {
    await bridge?.close();
    await new Promise<void>((r) => target.close(() => r()));
  });

  const deliveries = (data: string) => seen.filter((s) => Buffer.from(s.body.message.data, 'base64').toString() === JSON.stringify(data));

  it('delivers a message published over HTTP as a binary-mode CloudEvent', async () => {
    const id = await new HttpBridgePublisher(bridge.url, 'p').publish('t', 'hello', { type: 'x' }, 'k1');
    await waitFor('delivery', async () => deliveries('hello').length === 1);
    const [d] = deliveries('hello');
    expect(d?.headers).toMatchObject({
      'ce-id': id,
      'ce-specversion': '1.0',
      'ce-type': 'google.cloud.pubsub.topic.v1.messagePublished',
      'ce-source': '//pubsub.googleapis.com/projects/p/topics/t',
    });
    expect(d?.body).toMatchObject({
      message: { attributes: { type: 'x' }, messageId: id, orderingKey: 'k1' },
      subscription: 'projects/p/subscriptions/sub',
      deliveryAttempt: 1,
    });
  });

  it('redelivers on 5xx until a 2xx, and dead-letters after the attempts', async () => {
    failFirst.set('"flaky"', 2);
    failFirst.set('"poison"', Number.POSITIVE_INFINITY);
    await bridge.publish('t', 'flaky', {});
    const poisonId = await bridge.publish('t', 'poison', {});
    await waitFor('flaky delivered', async () => deliveries('flaky').length === 3, { timeoutMs: 10_000 });
    expect(deliveries('flaky').map((d) => d.body.deliveryAttempt)).toEqual([1, 2, 3]);
    await waitFor('poison dead-lettered', async () => bridge.deadLettered.some((d) => d.messageId === poisonId), { timeoutMs: 10_000 });
    expect(deliveries('poison')).toHaveLength(3);
    expect(logger.lines.some((l) => l.event === 'dead_letter' && l.messageId === poisonId)).toBe(true);
  });

  it('keeps one ordering key in order, and rejects a publish with nothing in it', async () => {
    await bridge.publish('t', 'ordered-1', {}, 'same');
    await bridge.publish('t', 'ordered-2', {}, 'same');
    await waitFor('both delivered', async () => deliveries('ordered-2').length === 1);
    // ordered-1 takes 300 ms to be handled and ordered-2 none: only serial delivery keeps them in order.
    expect(acked.filter((d) => d.startsWith('"ordered'))).toEqual(['"ordered-1"', '"ordered-2"']);
    const res = await fetch(`${bridge.url}/v1/projects/p/topics/t:publish`, { method: 'POST', body: JSON.stringify({ messages: [{}] }) });
    expect(res.status).toBe(400);
  });
});
