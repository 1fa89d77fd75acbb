import type { PubSub, Topic } from '@google-cloud/pubsub';
import { type DeathNotice, DeathNotice as DeathNoticeSchema, deathNoticeAttributes } from './deathNotice.js';

/**
 * What publishes messages. The Pub/Sub implementation is the real client (the emulator locally and in
 * tests, via PUBSUB_EMULATOR_HOST); `publishDeathNotice` validates before sending so nothing we emit is
 * poison to our own consumer.
 */
export interface Publisher {
  publish(topic: string, json: unknown, attributes: Record<string, string>, orderingKey?: string): Promise<string>;
  close(): Promise<void>;
}

export class PubSubPublisher implements Publisher {
  private readonly topics = new Map<string, Topic>();
  constructor(private readonly pubsub: PubSub) {}

  private topic(name: string): Topic {
    let t = this.topics.get(name);
    if (!t) {
      t = this.pubsub.topic(name, { messageOrdering: true, batching: { maxMessages: 1, maxMilliseconds: 0 } });
      this.topics.set(name, t);
    }
    return t;
  }

  async publish(topic: string, json: unknown, attributes: Record<string, string>, orderingKey?: string): Promise<string> {
    const t = this.topic(topic);
    try {
      return await t.publishMessage({ json, attributes, ...(orderingKey ? { orderingKey } : {}) });
    } catch (err) {
      // After an ordered publish fails, the key is paused until resumed; the next notice must still go out.
      if (orderingKey) t.resumePublishing(orderingKey);
      throw err;
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.topics.values()].map((t) => t.flush()));
    await this.pubsub.close();
  }
}

/**
 * Local only: `npm start` without an installed emulator runs an in-process bridge that takes the Pub/Sub
 * REST publish shape; `PUBSUB_BRIDGE_URL` (set by the stack for its functions) points publishers at it.
 */
export class HttpBridgePublisher implements Publisher {
  constructor(
    private readonly baseUrl: string,
    private readonly projectId: string,
  ) {}

  async publish(topic: string, json: unknown, attributes: Record<string, string>, orderingKey?: string): Promise<string> {
    const res = await fetch(`${this.baseUrl}/v1/projects/${encodeURIComponent(this.projectId)}/topics/${encodeURIComponent(topic)}:publish`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ data: Buffer.from(JSON.stringify(json)).toString('base64'), attributes, ...(orderingKey ? { orderingKey } : {}) }] }),
      signal: AbortSignal.timeout(10_000),
    });
    if (!res.ok) throw new Error(`local bridge publish failed: HTTP ${res.status} ${await res.text()}`);
    const body = (await res.json()) as { messageIds?: string[] };
    const id = body.messageIds?.[0];
    if (!id) throw new Error('local bridge publish returned no message ID');
    return id;
  }

  async close(): Promise<void> {}
}

export async function createPubSubPublisher(
  projectId: string | undefined,
  bridgeUrl: string | undefined = process.env.PUBSUB_BRIDGE_URL,
): Promise<Publisher> {
  if (bridgeUrl) return new HttpBridgePublisher(bridgeUrl, projectId ?? 'afterlife-local');
  const { PubSub } = await import('@google-cloud/pubsub');
  return new PubSubPublisher(new PubSub({ ...(projectId ? { projectId } : {}), ...emulatorOptions(process.env.PUBSUB_EMULATOR_HOST) }));
}

/**
 * The emulator needs no credentials, but the client still asked the metadata server which universe it is
 * in: outside Google Cloud that printed a MetadataLookupWarning on every kit's first publish (its SIGTERM
 * notice). Naming the universe (and the emulator) leaves nothing to look up.
 */
export function emulatorOptions(host: string | undefined): { emulatorMode?: boolean; universeDomain?: string } {
  return host ? { emulatorMode: true, universeDomain: 'googleapis.com' } : {};
}

export async function publishDeathNotice(publisher: Publisher, topic: string, notice: DeathNotice): Promise<string> {
  const valid = DeathNoticeSchema.parse(notice);
  return publisher.publish(topic, valid, deathNoticeAttributes(valid), valid.executorId);
}
