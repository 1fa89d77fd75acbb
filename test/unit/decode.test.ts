import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../packages/executor/src/errors.js';
import { DeathNotice, deathNotice } from '../../packages/executor/src/contract/deathNotice.js';
import { decodePubSubJson } from '../../shared/events/pubsub.js';

const envelope = (data: string | undefined, extra: Record<string, unknown> = {}) => ({
  message: { ...(data !== undefined ? { data } : {}), messageId: '42', attributes: { type: 'executor.dead' } },
  subscription: 'projects/p/subscriptions/s',
  ...extra,
});
const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64');
const notice = deathNotice({ executorId: 'e1', applicationName: 'shop', reason: 'sigterm', detectedBy: 'kit' });

describe('decodePubSubJson(DeathNotice)', () => {
  it('decodes a valid notice, ignoring unknown fields', () => {
    const out = decodePubSubJson(envelope(b64({ ...notice, extra: true }), { deliveryAttempt: 3 }), DeathNotice);
    expect(out.payload).toEqual(notice);
    expect(out).toMatchObject({ messageId: '42', deliveryAttempt: 3, attributes: { type: 'executor.dead' } });
  });

  it.each([
    ['undefined body', undefined, /empty/],
    ['no message', { foo: 1 }, /envelope/],
    ['no data', envelope(undefined), /no data/],
    ['bad base64', envelope('***'), /base64/],
    ['not JSON', envelope(b64('hello')), /not JSON/],
    ['bad datetime', envelope(b64({ ...notice, detectedAt: 'yesterday' })), /schema/],
    ['wrong version', envelope(b64({ ...notice, version: 2 })), /schema/],
  ])('%s is an InvalidInputError', (_n, body, re) => {
    expect(() => decodePubSubJson(body, DeathNotice)).toThrow(InvalidInputError);
    expect(() => decodePubSubJson(body, DeathNotice)).toThrow(re);
  });
});
