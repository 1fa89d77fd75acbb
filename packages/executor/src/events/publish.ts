import { type DeathNotice, DeathNotice as DeathNoticeSchema, deathNoticeAttributes } from '../contract/deathNotice.js';
import { array, object, string } from '../contract/parse.js';

/**
 * Publishing without the Pub/Sub client library: the kit's path. `@google-cloud/pubsub` adds ~134 packages and
 * ~66 MB to an app (measured) to send one small message at shutdown; Pub/Sub's REST `publish` is one
 * POST. The recovery plane keeps the client (publisher.ts); both meet in the `Publisher` interface.
 */
export interface Publisher {
  publish(topic: string, json: unknown, attributes: Record<string, string>, orderingKey?: string): Promise<string>;
  close(): Promise<void>;
  /** Optional: one cheap request ahead of the first publish (connection, TLS, token, a cold emulator). */
  warm?(topic: string): Promise<void>;
}

export const PUBSUB_REST_ENDPOINT = 'https://pubsub.googleapis.com';

const PublishResponse = object({ messageIds: array(string({ min: 1 })) });

/** Pub/Sub's REST publish: the service (with a bearer token), the emulator and the local bridge (without). */
export class RestPublisher implements Publisher {
  constructor(
    private readonly endpoint: string,
    private readonly projectId: string,
    private readonly token?: () => Promise<string>,
    private readonly timeoutMs = 10_000,
  ) {}

  async publish(topic: string, json: unknown, attributes: Record<string, string>, orderingKey?: string): Promise<string> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.token) headers.authorization = `Bearer ${await this.token()}`;
    const url = `${this.endpoint.replace(/\/+$/, '')}/v1/projects/${encodeURIComponent(this.projectId)}/topics/${encodeURIComponent(topic)}:publish`;
    const res = await fetch(url, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        messages: [{ data: Buffer.from(JSON.stringify(json)).toString('base64'), attributes, ...(orderingKey ? { orderingKey } : {}) }],
      }),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`Pub/Sub publish to ${topic} failed: HTTP ${res.status} ${text.slice(0, 300)}`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const body = PublishResponse.safeParse(parsed);
    const id = body.success ? body.data.messageIds[0] : undefined;
    if (id === undefined) throw new Error(`Pub/Sub publish to ${topic} returned no message ID`);
    return id;
  }

  async close(): Promise<void> {}

  /**
   * A GET of the topic, its answer ignored (a publisher-only account gets 403, which warms just as well):
   * the notice at shutdown has a second at most, and the first request to an endpoint — DNS, TLS, the token,
   * the emulator's REST layer still cold — can take most of it.
   */
  async warm(topic: string): Promise<void> {
    try {
      const headers: Record<string, string> = {};
      if (this.token) headers.authorization = `Bearer ${await this.token()}`;
      const res = await fetch(
        `${this.endpoint.replace(/\/+$/, '')}/v1/projects/${encodeURIComponent(this.projectId)}/topics/${encodeURIComponent(topic)}`,
        {
          headers,
          signal: AbortSignal.timeout(5_000),
        },
      );
      await res.arrayBuffer();
    } catch {
      // Only a warm-up: the publish itself reports its own failure.
    }
  }
}

/**
 * Local only: `npm start` without an installed emulator runs an in-process bridge that takes the Pub/Sub
 * REST publish shape; `PUBSUB_BRIDGE_URL` (set by the stack for its functions) points publishers at it.
 */
export class HttpBridgePublisher extends RestPublisher {
  constructor(baseUrl: string, projectId: string) {
    super(baseUrl, projectId);
  }
}

export async function publishDeathNotice(publisher: Publisher, topic: string, notice: DeathNotice): Promise<string> {
  const valid = DeathNoticeSchema.parse(notice);
  return publisher.publish(topic, valid, deathNoticeAttributes(valid), valid.executorId);
}
