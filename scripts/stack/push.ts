import type { PubSub, Subscription } from '@google-cloud/pubsub';
import { ensureTopic } from '../../shared/events/bridge.js';

/**
 * The local twin of infra/pubsub.tf's executorDeath subscription: a push subscription on the emulator
 * that POSTs each death notice to the served function, with the same dead-letter policy and a retry
 * policy. The endpoint carries `/projects/<p>/topics/<t>`, as in production, because that is where
 * functions-framework reads the topic when it turns the raw push body into a CloudEvent.
 */
export interface PushOptions {
  topic: string;
  subscription: string;
  /** The function's base URL; the topic path is appended. */
  functionUrl: string;
  deadLetterTopic: string;
  maxDeliveryAttempts: number;
  /** Backoff between redeliveries of a nacked notice (production: 10 s to 600 s). */
  minimumBackoffS?: number;
  maximumBackoffS?: number;
  ackDeadlineSeconds?: number;
}

export function pushEndpoint(functionUrl: string, projectId: string, topic: string): string {
  return `${functionUrl.replace(/\/$/, '')}/projects/${projectId}/topics/${topic}`;
}

export async function ensurePushSubscription(pubsub: PubSub, o: PushOptions): Promise<Subscription> {
  await ensureTopic(pubsub, o.topic);
  await ensureTopic(pubsub, o.deadLetterTopic);
  const projectId = pubsub.projectId;
  const sub = pubsub.subscription(o.subscription);
  const [exists] = await sub.exists();
  if (!exists) {
    await pubsub
      .topic(o.topic)
      .createSubscription(o.subscription, {
        pushConfig: { pushEndpoint: pushEndpoint(o.functionUrl, projectId, o.topic) },
        ackDeadlineSeconds: o.ackDeadlineSeconds ?? 60,
        retryPolicy: { minimumBackoff: { seconds: o.minimumBackoffS ?? 1 }, maximumBackoff: { seconds: o.maximumBackoffS ?? 10 } },
        deadLetterPolicy: { deadLetterTopic: pubsub.topic(o.deadLetterTopic).name, maxDeliveryAttempts: o.maxDeliveryAttempts },
      })
      .catch((err: unknown) => {
        if ((err as { code?: unknown }).code !== 6) throw err; // gRPC ALREADY_EXISTS
      });
  }
  return sub;
}
