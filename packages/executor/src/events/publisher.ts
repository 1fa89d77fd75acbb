import type { PubSub, Topic } from '@google-cloud/pubsub';
import { HttpBridgePublisher, type Publisher } from './publish.js';

/**
 * The recovery plane's publisher: the real client (the emulator locally and in tests, via
 * PUBSUB_EMULATOR_HOST). The interface, the REST publisher and `publishDeathNotice` (which validates before
 * sending, so nothing we emit is poison to our own consumer) live in publish.ts, the kit's lighter path.
 */
export { HttpBridgePublisher, type Publisher, publishDeathNotice, RestPublisher } from './publish.js';

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
