import { z } from 'zod';
import { InvalidInputError, type Parser } from '../../packages/executor/src/plane/index.js';

/**
 * The body of an Eventarc Pub/Sub CloudEvent (`google.cloud.pubsub.topic.v1.messagePublished`), and of
 * a raw push request (which has the same `message`). `deliveryAttempt` is only there on subscriptions
 * with a dead-letter policy, so nothing depends on it.
 */
export const MessagePublishedData = z.object({
  message: z.object({
    data: z.string().optional(),
    attributes: z.record(z.string(), z.string()).optional(),
    messageId: z.string().optional(),
    message_id: z.string().optional(),
    publishTime: z.string().optional(),
    orderingKey: z.string().optional(),
  }),
  subscription: z.string().optional(),
  deliveryAttempt: z.number().int().optional(),
});
export type MessagePublishedData = z.infer<typeof MessagePublishedData>;

/** Larger than any honest notice by three orders of magnitude; a bigger payload is poison. */
export const MAX_NOTICE_BYTES = 64 * 1024;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export interface DecodedMessage<T> {
  messageId: string | undefined;
  attributes: Record<string, string>;
  deliveryAttempt: number | undefined;
  payload: T;
}

/**
 * Decodes and validates against a contract parser (the death notice) or a zod schema; every failure is an
 * InvalidInputError (poison: ack with the reason).
 */
export function decodePubSubJson<T>(body: unknown, schema: Pick<Parser<T>, 'safeParse'> | z.ZodType<T>): DecodedMessage<T> {
  if (body === undefined || body === null || body === '') throw new InvalidInputError('empty event body');
  const envelope = MessagePublishedData.safeParse(body);
  if (!envelope.success) {
    throw new InvalidInputError(
      'not a Pub/Sub message envelope',
      envelope.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`),
    );
  }
  const { message } = envelope.data;
  const data = message.data;
  if (data === undefined || data === '') throw new InvalidInputError('message has no data');
  if (data.length > Math.ceil((MAX_NOTICE_BYTES * 4) / 3) + 4) {
    throw new InvalidInputError(`message data larger than ${MAX_NOTICE_BYTES} bytes`);
  }
  const compact = data.replace(/\s+/g, '');
  if (compact.length % 4 !== 0 || !BASE64.test(compact)) throw new InvalidInputError('message data is not valid base64');
  const text = Buffer.from(compact, 'base64').toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new InvalidInputError('message data is not JSON');
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new InvalidInputError(
      'message does not match the schema',
      parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`),
    );
  }
  return {
    messageId: message.messageId ?? message.message_id,
    attributes: message.attributes ?? {},
    deliveryAttempt: envelope.data.deliveryAttempt,
    payload: parsed.data,
  };
}
