/**
 * What executorDeath accepts over HTTP: a Pub/Sub `messagePublished` CloudEvent as Eventarc delivers it,
 * in binary mode (`ce-*` headers, the Pub/Sub envelope as a JSON body) or structured mode
 * (`application/cloudevents+json`), or the raw body of a Pub/Sub push subscription (`{message,
 * subscription}`, no `ce-*` headers), which is the same envelope. Anything else is answered here, in JSON,
 * before any decoding: no Pub/Sub delivery looks like that, so it is the caller's mistake (4xx), not a
 * notice to ack or retry.
 * @module
 */

export const PUBSUB_EVENT_TYPE = 'google.cloud.pubsub.topic.v1.messagePublished';

export type Delivery =
  | { ok: true; data: unknown; id: string | undefined; traceparent: string | undefined }
  | { ok: false; status: number; body: { error: string; code: string } };

export interface HttpRequestLike {
  method: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

export function readDelivery(req: HttpRequestLike): Delivery {
  const reject = (status: number, code: string, error: string): Delivery => ({ ok: false, status, body: { error, code } });
  if (req.method !== 'POST')
    return reject(
      405,
      'method_not_allowed',
      'use POST: executorDeath receives Pub/Sub deliveries (a CloudEvent, or a push subscription body)',
    );
  const media = header(req, 'content-type')?.split(';')[0]?.trim().toLowerCase();
  if (media === 'application/cloudevents+json') {
    const e = req.body;
    if (!isRecord(e)) return reject(400, 'invalid_cloudevent', 'a structured CloudEvent must be a JSON object');
    const wrong = attributeProblem(e.specversion, e.type);
    if (wrong) return reject(400, 'invalid_cloudevent', wrong);
    return {
      ok: true,
      data: e.data,
      id: typeof e.id === 'string' ? e.id : undefined,
      traceparent: typeof e.traceparent === 'string' ? e.traceparent : header(req, 'traceparent'),
    };
  }
  if (media !== 'application/json') {
    return reject(415, 'unsupported_media_type', 'send the CloudEvent as application/json (binary mode) or application/cloudevents+json');
  }
  const specversion = header(req, 'ce-specversion');
  const type = header(req, 'ce-type');
  if (specversion === undefined && type === undefined) return rawPush(req, reject);
  const wrong = attributeProblem(specversion, type);
  if (wrong) return reject(400, 'invalid_cloudevent', wrong);
  return { ok: true, data: req.body, id: header(req, 'ce-id'), traceparent: header(req, 'ce-traceparent') ?? header(req, 'traceparent') };
}

/** A push subscription's POST: the envelope itself, its message ID the event's ID. */
function rawPush(req: HttpRequestLike, reject: (status: number, code: string, error: string) => Delivery): Delivery {
  const message = isRecord(req.body) ? req.body.message : undefined;
  if (!isRecord(message)) {
    return reject(400, 'invalid_delivery', 'neither a CloudEvent (ce-specversion, ce-type) nor a Pub/Sub push body ({"message": {...}})');
  }
  const id =
    typeof message.messageId === 'string' ? message.messageId : typeof message.message_id === 'string' ? message.message_id : undefined;
  return { ok: true, data: req.body, id, traceparent: header(req, 'traceparent') };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function attributeProblem(specversion: unknown, type: unknown): string | undefined {
  if (specversion !== '1.0') return `CloudEvents specversion must be "1.0" (got ${describe(specversion)})`;
  if (type !== PUBSUB_EVENT_TYPE) return `CloudEvent type must be ${PUBSUB_EVENT_TYPE} (got ${describe(type)})`;
  return undefined;
}

function describe(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v.slice(0, 100)) : v === undefined ? 'none' : typeof v;
}

function header(req: HttpRequestLike, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' ? v : Array.isArray(v) ? v[0] : undefined;
}
