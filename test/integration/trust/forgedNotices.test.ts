import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { deathNotice, type DeathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { createRedis } from '../../../packages/executor/src/lock/redis.js';
import { beat, makeOrphans, pendingIds } from '../../helpers/agents.js';
import { pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { kitEnv } from '../../helpers/kit.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Issue 23, observations 2 and 6. A death notice is a claim anyone on `executor-deaths` can make (every
 * executor's service account may publish). The plane re-verifies it against its own evidence — the
 * liveness lock in Postgres, the heartbeat in Redis judged on its own clock and thresholds — so no value
 * the sender supplies (`staleBeatAt`, `evidence`, `detectedBy`) widens what counts as death; and a notice
 * about an executor the plane has never heard of costs a lookup, not a recovery, and writes nothing.
 */
describe('forged death notices', () => {
  let tdb: TestDatabase;
  const app = uniqueName('trust-forged');
  let rt: ReturnType<typeof testRuntime>;
  let live: ExecutorHandle | undefined;
  const envelope = (n: DeathNotice) => JSON.parse(pubsubCloudEvent(JSON.stringify(n)).body) as unknown;
  const forged = (executorId: string, extra: Partial<DeathNotice> = {}) =>
    deathNotice({ executorId, applicationName: app, reason: 'heartbeat-lapsed', detectedBy: 'spoofed-reaper', ...extra });
  const registryState = async (id: string) =>
    (
      await tdb.sql.query<{ state: string; detected_by: string | null }>(
        `SELECT state, detected_by FROM afterlife.executors WHERE application_name = $1 AND executor_id = $2`,
        [app, id],
      )
    ).rows[0];

  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = testRuntime({ databaseUrl: tdb.url, applicationName: app });
    // A live executor with the real kit: liveness lock held, a fresh beat every 250 ms, registered alive.
    live = await startExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      applicationVersion: 'v1',
      executorId: 'exec-live',
      env: kitEnv({ ttlMs: 3_000 }),
    });
    for (const id of ['l-1', 'l-2', 'l-3']) await live.start(id, { steps: 2, stepMs: 120_000 });
    await waitFor(
      '3 PENDING on exec-live and the kit registered',
      async () => (await pendingIds(tdb.sql, 'exec-live')).length === 3 && (await registryState('exec-live'))?.state === 'alive',
    );
  });
  afterAll(async () => {
    await live?.stop();
    await rt?.close();
    await tdb?.drop();
  });

  it('obs. 2: a heartbeat-lapsed notice with a far-future staleBeatAt about a live executor is refused; nothing moves, the executor lives', async () => {
    const before = rt.logger.lines.length;
    // The audit's notice exactly: no `evidence`, so the recovery never re-checked the lock.
    const out = await handleDeathEvent(rt, envelope(forged('exec-live', { staleBeatAt: '9999-01-01T00:00:00Z' })));
    expect(out.ack).toBe(true);
    expect(out.kind === 'refused' || (out.kind === 'recovered' && out.summary.outcome === 'false-alarm'), JSON.stringify(out)).toBe(true);
    expect(await pendingIds(tdb.sql, 'exec-live')).toHaveLength(3);
    expect((await registryState('exec-live'))?.state).toBe('alive');
    expect(
      rt.logger.lines
        .slice(before)
        .some((l) => l.event === 'death_notice_refused' || l.event === 'recovery_false_alarm' || /false alarm/.test(String(l.msg))),
    ).toBe(true);
    // The kit was not fenced: it is still running.
    const exited = await Promise.race([live!.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 1_500))]);
    expect(exited).toBe(false);
  });

  it('obs. 2: every sender-supplied evidence value is re-verified: heartbeat/sessions/none evidence, a past or absent staleBeatAt', async () => {
    for (const extra of [
      { evidence: 'heartbeat' as const, staleBeatAt: '9999-01-01T00:00:00Z' },
      { evidence: 'sessions' as const, staleBeatAt: '9999-01-01T00:00:00Z' },
      { evidence: 'heartbeat' as const },
      { evidence: 'sessions' as const },
      {},
      { staleBeatAt: '1970-01-01T00:00:00Z' },
      { staleBeatAt: new Date().toISOString(), evidence: 'liveness' as const },
    ]) {
      const out = await handleDeathEvent(rt, envelope(forged('exec-live', extra)));
      expect(out.ack, JSON.stringify(extra)).toBe(true);
      expect(
        out.kind === 'refused' || (out.kind === 'recovered' && out.summary.outcome === 'false-alarm'),
        `${JSON.stringify(extra)} → ${JSON.stringify(out)}`,
      ).toBe(true);
    }
    expect(await pendingIds(tdb.sql, 'exec-live')).toHaveLength(3);
    expect((await registryState('exec-live'))?.state).toBe('alive');
  });

  it('obs. 2: the lock alone refuses a heartbeat-lapsed notice while Redis cannot be read (no evidence of life from Redis, Postgres still says alive)', async () => {
    const down = createRedis('redis://127.0.0.1:1');
    const blind = testRuntime({ databaseUrl: tdb.url, applicationName: app, redis: down });
    try {
      const out = await handleDeathEvent(
        blind,
        envelope(forged('exec-live', { staleBeatAt: '9999-01-01T00:00:00Z', evidence: 'liveness' })),
      );
      expect(out).toMatchObject({ ack: true, kind: 'refused' });
      expect(await pendingIds(tdb.sql, 'exec-live')).toHaveLength(3);
    } finally {
      await blind.close();
      down.disconnect();
    }
  });

  it('obs. 2: a forged "liveness" evidence cannot stand in for the heartbeat for an executor whose kit holds no lock (Redis down: nacked)', async () => {
    // exec-nolock: PENDING rows, a registry row without liveness (a kit with AFTERLIFE_LIVENESS=off).
    await makeOrphans({
      databaseUrl: tdb.url,
      sql: tdb.sql,
      applicationName: app,
      executorId: 'exec-nolock',
      applicationVersion: 'v1',
      ids: ['n-1', 'n-2'],
      stepMs: 60_000,
    });
    await tdb.sql.query(
      `INSERT INTO afterlife.executors (application_name, executor_id, application_version, state, liveness) VALUES ($1, 'exec-nolock', 'v1', 'alive', false)`,
      [app],
    );
    const down = createRedis('redis://127.0.0.1:1');
    const blind = testRuntime({ databaseUrl: tdb.url, applicationName: app, redis: down });
    try {
      const out = await handleDeathEvent(
        blind,
        envelope(forged('exec-nolock', { evidence: 'liveness', staleBeatAt: '9999-01-01T00:00:00Z' })),
      );
      expect(out).toMatchObject({ ack: false, kind: 'retry' });
      expect(await pendingIds(tdb.sql, 'exec-nolock')).toHaveLength(2);
    } finally {
      await blind.close();
      down.disconnect();
    }
    // With Redis up and a fresh beat the far-future staleBeatAt does not hide it: a false alarm.
    await beat(rt.redis!, app, 'exec-nolock', 'v1', 3_000);
    const out = await handleDeathEvent(rt, envelope(forged('exec-nolock', { evidence: 'liveness', staleBeatAt: '9999-01-01T00:00:00Z' })));
    expect(out).toMatchObject({ ack: true, kind: 'recovered', summary: { outcome: 'false-alarm' } });
    expect(await pendingIds(tdb.sql, 'exec-nolock')).toHaveLength(2);
  });

  it('obs. 6: 200 notices about invented executors cost a lookup each, write no row and are acked with a logged reason', async () => {
    const count = async (t: string) =>
      (await tdb.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM afterlife.${t} WHERE application_name = $1`, [app])).rows[0]?.n;
    const before = { executors: await count('executors'), recoveries: await count('recoveries') };
    const lines = rt.logger.lines.length;
    const started = Date.now();
    for (let i = 0; i < 200; i++) {
      for (const reason of ['heartbeat-lapsed', 'manual'] as const) {
        const out = await handleDeathEvent(rt, envelope(forged(`invented-${i}`, { reason })));
        expect(out).toMatchObject({ ack: true, kind: 'refused' });
      }
    }
    const unknownMs = (Date.now() - started) / 400;
    expect({ executors: await count('executors'), recoveries: await count('recoveries') }).toEqual(before);
    const refused = rt.logger.lines.slice(lines).filter((l) => l.event === 'death_notice_refused');
    expect(refused).toHaveLength(400);
    expect(String(refused[0]?.reason)).toMatch(/unknown executor/);
    // A lookup, not a recovery: cheaper than the recovery a known executor's notice still gets (one with a
    // registry row and nothing PENDING: a nothing-to-do recovery, measured the same way, same process).
    await tdb.sql.query(
      `INSERT INTO afterlife.executors (application_name, executor_id, application_version, state) VALUES ($1, 'exec-known', 'v1', 'alive')`,
      [app],
    );
    const t0 = Date.now();
    for (let i = 0; i < 100; i++) {
      const out = await handleDeathEvent(rt, envelope(forged('exec-known', { reason: 'manual' })));
      expect(out).toMatchObject({ ack: true, kind: 'recovered' });
    }
    const knownMs = (Date.now() - t0) / 100;
    expect(unknownMs, `unknown ${unknownMs} ms, known ${knownMs} ms`).toBeLessThan(knownMs);
  });
});
