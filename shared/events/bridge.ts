import type { Message, PubSub, Subscription } from '@google-cloud/pubsub';
import type { Logger } from '../../packages/executor/src/plane/index.js';

/**
 * The local stand-in for Eventarc: streaming-pull a subscription and POST each message to a
 * functions-framework server as a binary-mode Pub/Sub CloudEvent; ack on 2xx, nack on anything else
 * (including network errors), so redelivery and dead-lettering behave as they do in production.
 */
export interface BridgeOptions {
  pubsub: PubSub;
  topic: string;
  subscription: string;
  targetUrl: string;
  logger: Logger;
  /** Dead-letter topic and attempts for the subscription, as the production subscription has them. */
  deadLetterTopic?: string;
  maxDeliveryAttempts?: number;
  /** Per-delivery HTTP timeout. */
  timeoutMs?: number;
}

export interface Bridge {
  subscription: Subscription;
  delivered: number;
  close(): Promise<void>;
}

export async function ensureTopic(pubsub: PubSub, name: string): Promise<void> {
  const [exists] = await pubsub.topic(name).exists();
  if (!exists) await pubsub.createTopic(name).catch(ignoreAlreadyExists);
}

export async function ensureSubscription(
  pubsub: PubSub,
  topic: string,
  name: string,
  opts: { deadLetterTopic?: string; maxDeliveryAttempts?: number } = {},
): Promise<Subscription> {
  await ensureTopic(pubsub, topic);
  if (opts.deadLetterTopic) await ensureTopic(pubsub, opts.deadLetterTopic);
  const sub = pubsub.subscription(name);
  const [exists] = await sub.exists();
  if (!exists) {
    await pubsub
      .topic(topic)
      .createSubscription(name, {
        enableMessageOrdering: true,
        ackDeadlineSeconds: 60,
        retryPolicy: { minimumBackoff: { seconds: 0, nanos: 200_000_000 }, maximumBackoff: { seconds: 10 } },
        ...(opts.deadLetterTopic
          ? {
              deadLetterPolicy: {
                deadLetterTopic: pubsub.topic(opts.deadLetterTopic).name,
                maxDeliveryAttempts: opts.maxDeliveryAttempts ?? 10,
              },
            }
          : {}),
      })
      .catch(ignoreAlreadyExists);
  }
  return sub;
}

export async function startPullBridge(o: BridgeOptions): Promise<Bridge> {
  const sub = await ensureSubscription(o.pubsub, o.topic, o.subscription, {
    ...(o.deadLetterTopic ? { deadLetterTopic: o.deadLetterTopic } : {}),
    ...(o.maxDeliveryAttempts ? { maxDeliveryAttempts: o.maxDeliveryAttempts } : {}),
  });
  const log = o.logger.child({ bridge: o.subscription });
  const bridge: Bridge = {
    subscription: sub,
    delivered: 0,
    close: async () => {
      sub.removeAllListeners('message');
      await sub.close();
    },
  };
  sub.on('message', (m: Message) => {
    void (async () => {
      try {
        const res = await fetch(o.targetUrl, {
          method: 'POST',
          headers: cloudEventHeaders(m, o.topic, o.pubsub.projectId),
          body: JSON.stringify({
            message: {
              data: m.data.toString('base64'),
              attributes: m.attributes,
              messageId: m.id,
              publishTime: m.publishTime.toISOString(),
              ...(m.orderingKey ? { orderingKey: m.orderingKey } : {}),
            },
            subscription: sub.name,
            ...(m.deliveryAttempt ? { deliveryAttempt: m.deliveryAttempt } : {}),
          }),
          signal: AbortSignal.timeout(o.timeoutMs ?? 60_000),
        });
        await res.arrayBuffer().catch(() => undefined);
        if (res.ok) {
          m.ack();
          bridge.delivered += 1;
        } else {
          log.debug('delivery failed; nacked', { status: res.status, messageId: m.id });
          m.nack();
        }
      } catch (err) {
        log.debug('delivery errored; nacked', { err, messageId: m.id });
        m.nack();
      }
    })();
  });
  sub.on('error', (err) => log.warn('subscription error', { err }));
  return bridge;
}

function cloudEventHeaders(m: Message, topic: string, project: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'ce-id': m.id,
    'ce-specversion': '1.0',
    'ce-type': 'google.cloud.pubsub.topic.v1.messagePublished',
    'ce-source': `//pubsub.googleapis.com/projects/${project}/topics/${topic}`,
    'ce-time': m.publishTime.toISOString(),
  };
}

function ignoreAlreadyExists(err: unknown): void {
  if ((err as { code?: unknown }).code !== 6) throw err; // gRPC ALREADY_EXISTS
}
