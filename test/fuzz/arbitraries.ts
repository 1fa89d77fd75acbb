import fc from 'fast-check';
import { PUBSUB_EVENT_TYPE } from '../../functions/executorDeath/transport.js';

/**
 * Generators for the fuzz suite. Every run is seeded (FUZZ_SEED overrides, to replay a failure) and
 * bounded, so the suite runs in seconds and a failure names the input that broke the contract.
 */
export const FUZZ = { seed: Number(process.env.FUZZ_SEED ?? 20261201), numRuns: Number(process.env.FUZZ_RUNS ?? 0) || undefined };
export const runs = (n: number) => ({ seed: FUZZ.seed, numRuns: FUZZ.numRuns ?? n, endOnFailure: true });

/** Strings that have broken parsers before: NUL, non-ASCII, control characters, glob and key separators. */
export const nasty = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    'sec-ü1',
    '日本',
    'a:b',
    'af*',
    '[x]',
    '\\',
    '"',
    "'",
    '%00',
    'TRUE',
    'True',
    'yes',
    '1',
    '0',
    'true',
    'false',
    '0x10',
    '1e3',
    '-1',
    '16.0',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ maxLength: 600 }),
);

/** A death notice, sometimes whole and right, sometimes with one field broken or extra fields. */
export function noticeLike(app: string) {
  const good = fc.record({
    type: fc.constant('executor.dead'),
    version: fc.constant(1),
    executorId: fc.oneof(fc.constantFrom('fz-1', 'fz-2', 'fz-ü'), nasty),
    applicationName: fc.oneof({ weight: 4, arbitrary: fc.constant(app) }, { weight: 1, arbitrary: nasty }),
    reason: fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('sigterm', 'drained', 'heartbeat-lapsed', 'manual') },
      { weight: 1, arbitrary: nasty },
    ),
    detectedAt: fc.oneof({ weight: 4, arbitrary: fc.constant('2026-12-01T00:00:00Z') }, { weight: 1, arbitrary: nasty }),
    detectedBy: fc.oneof(fc.constant('fuzz'), nasty),
  });
  return fc.oneof(
    { weight: 5, arbitrary: good },
    {
      weight: 2,
      arbitrary: fc
        .tuple(good, fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }))
        .map(([g, extra]) => ({ ...extra, ...g })),
    },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  );
}

export interface GeneratedRequest {
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/** A CloudEvent delivery as Eventarc sends it, or one of the ways it can be wrong. */
export function deathDelivery(app: string): fc.Arbitrary<GeneratedRequest & { id: string }> {
  const data = fc.oneof(
    { weight: 6, arbitrary: noticeLike(app).map((n) => Buffer.from(JSON.stringify(n)).toString('base64')) },
    { weight: 1, arbitrary: nasty },
    { weight: 1, arbitrary: fc.base64String({ maxLength: 60 }) },
  );
  const envelope = fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .record({
          message: fc.record({ data, messageId: fc.string({ maxLength: 12 }) }, { requiredKeys: ['data'] }),
          subscription: fc.constant('projects/p/subscriptions/s'),
        })
        .map((e) => JSON.stringify(e)),
    },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 80 }) },
  );
  return fc
    .record({
      method: fc.oneof(
        { weight: 8, arbitrary: fc.constant('POST') },
        { weight: 1, arbitrary: fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH') },
      ),
      contentType: fc.oneof(
        { weight: 8, arbitrary: fc.constant('application/json') },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            'text/plain',
            'application/x-www-form-urlencoded',
            'application/octet-stream',
            'application/cloudevents+json',
            'application/json; charset=utf-8',
          ),
        },
      ),
      specversion: fc.oneof({ weight: 8, arbitrary: fc.constant('1.0') }, { weight: 1, arbitrary: fc.constantFrom('0.3', '', '1') }),
      rawPush: fc.boolean(),
      type: fc.oneof(
        { weight: 8, arbitrary: fc.constant(PUBSUB_EVENT_TYPE) },
        { weight: 1, arbitrary: fc.constantFrom('google.cloud.storage.object.v1.finalized', '') },
      ),
      body: envelope,
      n: fc.integer({ min: 0, max: 1e9 }),
    })
    .map((r) => {
      const id = `fz-${r.n}`;
      const headers: Record<string, string> = {
        'content-type': r.contentType,
        'ce-id': id,
        'ce-source': '//pubsub.googleapis.com/projects/p/topics/t',
      };
      // A raw push subscription sends no ce-* headers at all.
      if (r.specversion && !r.rawPush) headers['ce-specversion'] = r.specversion;
      if (r.type && !r.rawPush) headers['ce-type'] = r.type;
      // A push delivery's ID is its message's ID: set it, so the test can find the delivery's log line.
      const body = r.rawPush ? withMessageId(r.body, id) : r.body;
      return { id, method: r.method, headers, body: r.method === 'GET' ? undefined : body };
    });
}

/** A query string: known keys with nasty values, unknown keys, repeats and bracket forms. */
export function queryString(keys: string[]): fc.Arbitrary<string> {
  const key = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...keys) },
    { weight: 1, arbitrary: fc.constantFrom(...keys.map((k) => `${k}[]`), ...keys.map((k) => k.toLowerCase()), 'x') },
  );
  const pair = fc.tuple(key, nasty).map(([k, v]) => `${encodeURIComponent(k).replace(/%5B%5D/g, '[]')}=${encodeURIComponent(v)}`);
  return fc.array(pair, { maxLength: 3 }).map((ps) => (ps.length ? `?${ps.join('&')}` : ''));
}

function withMessageId(body: string, id: string): string {
  try {
    const v = JSON.parse(body) as { message?: unknown };
    if (typeof v === 'object' && v !== null && typeof v.message === 'object' && v.message !== null && !Array.isArray(v.message)) {
      (v.message as Record<string, unknown>).messageId = id;
      return JSON.stringify(v);
    }
  } catch {
    // not JSON: sent as generated
  }
  return body;
}
