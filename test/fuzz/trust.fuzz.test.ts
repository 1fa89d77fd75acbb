import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleDeathEvent } from '../helpers/executorDeath.js';
import { useRuntime } from '../../functions/runtime.js';
import { MAX_BODY_BYTES, MAX_INFLATED_BYTES } from '../../functions/transport.js';
import '../../functions/index.js';
import { heartbeatKey } from '../../packages/executor/src/contract/heartbeat.js';
import { waitReady } from '../../packages/executor/src/lock/redis.js';
import { judgeKit } from '../../shared/reaper/deathRule.js';
import { readBeats } from '../../shared/reaper/evidence.js';
import { pendingIds } from '../helpers/agents.js';
import { pubsubCloudEvent, serve } from '../helpers/cloudEvents.js';
import { rawPost } from '../helpers/rawPost.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../helpers/executor.js';
import { kitEnv } from '../helpers/kit.js';
import { testReaperDeps } from '../helpers/reaper.js';
import { testRuntime } from '../helpers/runtime.js';
import { runs } from './arbitraries.js';

/**
 * Issue 23's trust boundaries, generated: death notices with extreme field values (staleBeatAt, evidence,
 * timestamps, control characters in every string) never move a live executor's work nor write a row for
 * an executor the plane never heard of; heartbeat values outside what a kit writes are never evidence of
 * life; compressed bodies of every encoding and size are answered in JSON, never with a 5xx, and never
 * inflated past the cap.
 */
const controls = fc.string({
  unit: fc.constantFrom('\u0000', '\n', '\r', '\u001b', '\u0007', '\u009b', '\u202e', 'a', '[', '3', '1', 'm', '{', '"'),
  minLength: 1,
  maxLength: 30,
});
const extremeDate = fc.oneof(
  fc.constantFrom(
    '9999-12-31T23:59:59.999Z',
    '0001-01-01T00:00:00Z',
    '1970-01-01T00:00:00Z',
    '2026-12-01T00:00:00+14:00',
    '2026-12-01T00:00:00-12:00',
  ),
  fc
    .date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true })
    .map((d) => d.toISOString()),
  controls,
);

describe('fuzz: trust boundaries', () => {
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;
  let live: ExecutorHandle | undefined;
  let drain: Awaited<ReturnType<typeof serve>>;
  let death: Awaited<ReturnType<typeof serve>>;
  const app = uniqueName('fz-trust');
  const envelope = (n: unknown) => JSON.parse(pubsubCloudEvent(JSON.stringify(n)).body) as unknown;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = testRuntime({ databaseUrl: tdb.url, applicationName: app });
    await waitReady(rt.redis!, 5_000);
    useRuntime(rt);
    [drain, death] = await Promise.all([serve('drain'), serve('executorDeath')]);
    live = await startExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      applicationVersion: 'v1',
      executorId: 'exec-live',
      env: kitEnv({ ttlMs: 3_000 }),
    });
    for (const id of ['fl-1', 'fl-2', 'fl-3']) await live.start(id, { steps: 2, stepMs: 300_000 });
    await waitFor('3 PENDING on exec-live', async () => (await pendingIds(tdb.sql, 'exec-live')).length === 3);
  });
  afterAll(async () => {
    await live?.stop();
    await Promise.all([drain, death].map((s) => s?.close()));
    await rt?.close();
    await tdb?.drop();
  });

  it(
    "notices with extreme values never move a live executor's work, and write nothing for invented executors",
    { timeout: 120_000 },
    async () => {
      const count = async () =>
        (
          await tdb.sql.query<{ n: number }>(
            `SELECT (SELECT count(*) FROM afterlife.executors) + (SELECT count(*) FROM afterlife.recoveries) AS n`,
          )
        ).rows[0]?.n;
      const rowsBefore = await count();
      const kinds: Record<string, number> = {};
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            executorId: fc.oneof(
              { weight: 3, arbitrary: fc.constant('exec-live') },
              { weight: 2, arbitrary: controls.map((s) => `inv-${s}`) },
            ),
            reason: fc.constantFrom('heartbeat-lapsed', 'manual', 'sigterm', 'drained'),
            detectedAt: extremeDate,
            detectedBy: fc.oneof(fc.constant('spoof'), controls),
            staleBeatAt: fc.option(extremeDate, { nil: undefined }),
            evidence: fc.option(fc.constantFrom('liveness', 'heartbeat', 'sessions'), { nil: undefined }),
            applicationVersions: fc.option(fc.array(fc.oneof(fc.constant('v1'), controls), { maxLength: 3 }), { nil: undefined }),
            beatEveryMs: fc.option(fc.oneof(fc.constantFrom(0, -1, 2_147_483_647, Number.MAX_SAFE_INTEGER), fc.integer()), {
              nil: undefined,
            }),
          }),
          async (f) => {
            const notice = {
              type: 'executor.dead',
              version: 1,
              applicationName: app,
              ...Object.fromEntries(Object.entries(f).filter(([, v]) => v !== undefined)),
            };
            const out = await handleDeathEvent(rt, envelope(notice));
            // Acked (poison, refused, or a recovery that found life); never nacked while everything is up.
            expect(out.ack, JSON.stringify({ notice, out })).toBe(true);
            kinds[out.kind] = (kinds[out.kind] ?? 0) + 1;
            if (out.kind === 'recovered')
              expect(out.summary.outcome === 'false-alarm' || out.summary.reenqueued === 0, JSON.stringify({ notice, out })).toBe(true);
          },
        ),
        runs(120),
      );
      // The generator reaches the verification, not only the decoder.
      expect(kinds.refused ?? 0, JSON.stringify(kinds)).toBeGreaterThan(20);
      expect(await pendingIds(tdb.sql, 'exec-live')).toHaveLength(3);
      const reg = await tdb.sql.query<{ state: string }>(`SELECT state FROM afterlife.executors WHERE executor_id = 'exec-live'`);
      expect(reg.rows[0]?.state).toBe('alive');
      expect(await count()).toBe(rowsBefore);
    },
  );

  it('heartbeat values outside what a kit writes are never evidence of life', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          beatEveryMs: fc.oneof(fc.constant(undefined), fc.integer({ min: 60_001, max: 2_147_483_647 })),
          beatAt: fc.oneof(
            fc.constant(new Date(Date.now() - 3_600_000).toISOString()),
            fc
              .date({ min: new Date(Date.now() + 120_000), max: new Date('9999-12-31T00:00:00Z'), noInvalidDate: true })
              .map((d) => d.toISOString()),
          ),
          ttlMs: fc.oneof(fc.constant(undefined), fc.integer({ min: 600_001, max: 2_147_483_647 })),
          pxMs: fc.oneof(fc.constant(undefined), fc.integer({ min: 1_000, max: 60_000 }), fc.integer({ min: 600_001, max: 2_000_000_000 })),
          garbage: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: controls }),
        }),
        async (v) => {
          const id = `hb-${n++}`;
          // Each case breaks at least one bound (else it is a kit's beat and may be fresh): skip those.
          const outOfBounds =
            v.garbage !== undefined ||
            v.pxMs === undefined ||
            v.pxMs > 600_000 ||
            (v.beatEveryMs ?? 0) > 60_000 ||
            (v.ttlMs ?? 0) > 600_000 ||
            (v.ttlMs === undefined && Date.parse(v.beatAt) > Date.now() + 60_000);
          const stale = v.ttlMs === undefined && Date.parse(v.beatAt) < Date.now() - 1_000;
          fc.pre(outOfBounds || stale);
          const value =
            v.garbage ??
            JSON.stringify({
              executorId: id,
              applicationName: app,
              applicationVersion: 'v1',
              state: 'alive',
              startedAt: v.beatAt,
              beatAt: v.beatAt,
              inFlight: 0,
              beatEveryMs: v.beatEveryMs,
              ttlMs: v.ttlMs,
            });
          if (v.pxMs === undefined) await rt.redis!.set(heartbeatKey(app, id), value);
          else await rt.redis!.set(heartbeatKey(app, id), value, 'PX', v.pxMs);
          const read = await readBeats(testReaperDeps(rt), [id]);
          if ('skipped' in read) throw new Error(read.skipped);
          const settings = {
            nowMs: Date.now(),
            intervalMs: rt.config.heartbeatIntervalMs,
            ttlMs: rt.config.heartbeatTtlMs,
            redisKeptKeysMs: 10 * rt.config.heartbeatTtlMs,
          };
          expect(judgeKit({ lock: 'free', beat: read.beats.get(id) }, settings), JSON.stringify(v)).not.toBe('alive');
          await rt.redis!.del(heartbeatKey(app, id));
        },
      ),
      runs(120),
    );
  });

  it(
    'compressed bodies of every encoding and size: JSON answers, never a 5xx, nothing inflated past the cap',
    { timeout: 120_000 },
    async () => {
      // Memory is measured by test/integration/trust/bodyBomb.test.ts: here the generator's own buffers share the process.
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            target: fc.constantFrom('drain', 'executorDeath'),
            encoding: fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'GZIP', 'x-gzip', 'compress', 'gzip, deflate', ''),
            declared: fc.constantFrom('gzip', 'deflate', 'br', 'match'),
            inflatedKiB: fc.oneof(
              fc.integer({ min: 0, max: 64 }),
              fc.integer({ min: 900, max: 1_200 }),
              fc.integer({ min: 4_096, max: 32_768 }),
            ),
            json: fc.boolean(),
            chunked: fc.boolean(),
          }),
          async (c) => {
            const raw = c.json
              ? Buffer.from(JSON.stringify({ applicationVersion: 'v1', pad: 'x'.repeat(c.inflatedKiB * 1024) }))
              : Buffer.alloc(c.inflatedKiB * 1024);
            const algo = c.declared === 'match' ? c.encoding.toLowerCase() : c.declared;
            const body =
              algo === 'gzip' || algo === 'x-gzip'
                ? gzipSync(raw)
                : algo === 'deflate'
                  ? deflateSync(raw)
                  : algo === 'br'
                    ? brotliCompressSync(raw)
                    : raw;
            // Chunked only for small bodies: the chunked bombs are test/integration/trust/bodyBomb.test.ts's (one
            // chunked 15 MiB brotli case answered no JSON once under load 27, not reproduced since: see its report).
            const res = await rawPost(
              c.target === 'drain' ? drain.url : death.url,
              body,
              { ...(c.encoding ? { 'content-encoding': c.encoding } : {}) },
              c.chunked && c.inflatedKiB <= 64,
            );
            expect(res.status, JSON.stringify({ ...c, res })).toBeLessThan(500);
            expect(() => JSON.parse(res.text), res.text).not.toThrow();
            const cap = c.encoding === '' || c.encoding === 'identity' ? MAX_BODY_BYTES : MAX_INFLATED_BYTES;
            if (raw.length > cap + 1024 && res.status < 300) throw new Error(`accepted ${raw.length} bytes inflated: ${JSON.stringify(c)}`);
          },
        ),
        runs(60),
      );
    },
  );
});
