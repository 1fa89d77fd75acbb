import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setState } from '../../../shared/db/queries/executors.js';
import { Heartbeat } from '../../../shared/executor/heartbeat.js';
import { LivenessLock } from '../../../shared/executor/liveness.js';
import type { FenceVerdict } from '../../../shared/liveness/fenceCheck.js';
import { readLiveness } from '../../../shared/liveness/held.js';
import { createRedis } from '../../../shared/lock/redis.js';
import { memoryLogger } from '../../../shared/log.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';

/**
 * The kit's liveness lock and heartbeat, each on its own, against the real Postgres and a Redis that is not
 * there. The lock is what the reaper reads (readLiveness, the same statement a tick uses); a terminated
 * session frees it and the module takes it back; a declaration of death reaches it as a NOTIFY.
 */
describe('kit modules: liveness lock and heartbeat', () => {
  let tdb: TestDatabase;
  let db: ReturnType<typeof afterlifeDb>;
  const app = uniqueName('app-live');
  beforeAll(async () => {
    tdb = await createTestDatabase();
    db = afterlifeDb(tdb.url);
  });
  afterAll(async () => {
    await db?.pool.end();
    await tdb?.drop();
  });

  const lock = (executorId: string, onFenced: (v: FenceVerdict) => void = () => undefined) =>
    new LivenessLock({ databaseUrl: tdb.url, applicationName: app, executorId, afterlifeSchema: 'afterlife', since: new Date(), logger: memoryLogger(), onFenced, checkEveryMs: 200 });

  it('held while the session lives, free the moment it ends, taken back after a terminated session', async () => {
    const l = lock('exec-a');
    await l.start();
    try {
      expect(l.held).toBe(true);
      expect((await readLiveness(db, app, ['exec-a', 'exec-b'])).held).toEqual(new Set(['exec-a']));
      // Another app's executor of the same ID is another lock.
      expect((await readLiveness(db, `${app}-other`, ['exec-a'])).held.size).toBe(0);

      const killed = await tdb.sql.query<{ ok: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'afterlife_live_exec-a' AND datname = current_database()`,
      );
      expect(killed.rows.map((r) => r.ok)).toEqual([true]);
      const t0 = Date.now();
      await waitFor('the lock taken back', async () => (await readLiveness(db, app, ['exec-a'])).held.has('exec-a'), { timeoutMs: 10_000, intervalMs: 20 });
      console.log(`[liveness] lock taken back ${Date.now() - t0} ms after pg_terminate_backend`);
    } finally {
      await l.close();
    }
    await waitFor('free once closed', async () => (await readLiveness(db, app, ['exec-a'])).held.size === 0, { timeoutMs: 5_000 });
  });

  it('a second holder of the same executor ID waits: the lock stays with the first', async () => {
    const first = lock('exec-dup');
    const second = lock('exec-dup');
    await first.start();
    await second.start();
    try {
      expect(first.held).toBe(true);
      expect(second.held).toBe(false);
      await first.close();
      await waitFor('the second takes it once the first is gone', async () => second.held, { timeoutMs: 5_000 });
    } finally {
      await first.close();
      await second.close();
    }
  });

  it('a declaration of death reaches the executor on its liveness connection (NOTIFY), at once', async () => {
    let fencedAt: number | undefined;
    let verdict: FenceVerdict | undefined;
    const l = lock('exec-z', (v) => {
      fencedAt ??= Date.now();
      verdict ??= v;
    });
    await l.start();
    try {
      // Another executor's death is not ours.
      await setState(db, { applicationName: app, executorId: 'exec-other', state: 'dead', reason: 'manual' });
      const t0 = Date.now();
      await setState(db, { applicationName: app, executorId: 'exec-z', state: 'dead', reason: 'manual' });
      await waitFor('fenced', async () => fencedAt !== undefined, { timeoutMs: 5_000, intervalMs: 5 });
      console.log(`[liveness] fenced ${(fencedAt ?? 0) - t0} ms after the registry write`);
      expect(verdict).toBe('dead');
    } finally {
      await l.close();
    }
  });

  it('the lease is timed by the server: a holder silent for the lease loses its session and lock, then takes them back', async () => {
    // Checks far apart: nothing renews the lease, as with a frozen process.
    const l = new LivenessLock({ databaseUrl: tdb.url, applicationName: app, executorId: 'exec-lease', afterlifeSchema: 'afterlife', since: new Date(), logger: memoryLogger(), onFenced: () => undefined, leaseMs: 3_000, checkEveryMs: 60_000 });
    await l.start();
    try {
      expect(l.leaseMs).toBe(3_000);
      const pid = await waitFor('the lease session', async () => {
        const r = await tdb.sql.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = 'afterlife_live_exec-lease' AND datname = current_database()`);
        return r.rows[0]?.pid;
      });
      const t0 = Date.now();
      await waitFor('the server ends the silent session', async () => {
        const r = await tdb.sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [pid]);
        return r.rowCount === 0;
      }, { timeoutMs: 10_000, intervalMs: 50 });
      const endedMs = Date.now() - t0;
      console.log(`[liveness] a session silent for its 3000 ms lease ended ${endedMs} ms after it was first seen`);
      expect(endedMs).toBeLessThan(3_000 + 2_000);
      await waitFor('the lock taken back on a new session', async () => (await readLiveness(db, app, ['exec-lease'])).held.has('exec-lease'), { timeoutMs: 10_000 });
    } finally {
      await l.close();
    }
  });

  it('an idle_session_timeout set in the URL is kept when shorter and keepable, replaced (loudly) when unsafe', async () => {
    const url = (ms: number) => `${tdb.url}${tdb.url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c idle_session_timeout=${ms}`)}`;
    const logger = memoryLogger();
    const kept = new LivenessLock({ databaseUrl: url(5_000), applicationName: app, executorId: 'exec-url', afterlifeSchema: 'afterlife', since: new Date(), logger, onFenced: () => undefined });
    const unsafe = new LivenessLock({ databaseUrl: url(1_000), applicationName: app, executorId: 'exec-url2', afterlifeSchema: 'afterlife', since: new Date(), logger, onFenced: () => undefined });
    await Promise.all([kept.start(), unsafe.start()]);
    try {
      expect(kept.held && unsafe.held).toBe(true);
      expect(kept.leaseMs).toBe(5_000);
      expect(unsafe.leaseMs).toBe(8_000);
      expect(logger.lines.filter((x) => x.event === 'liveness_lease').map((x) => x.severity).sort()).toEqual(['NOTICE', 'WARNING']);
    } finally {
      await Promise.all([kept.close(), unsafe.close()]);
    }
  });

  it('a heartbeat that cannot be written for a TTL is logged loudly and counted', async () => {
    const logger = memoryLogger();
    const redis = createRedis('redis://127.0.0.1:1');
    const hb = new Heartbeat(redis, 600, 100, () => ({ executorId: 'y', applicationName: 'x', applicationVersion: 'v1', state: 'alive', startedAt: '', beatAt: new Date().toISOString(), inFlight: 0 }), logger);
    hb.start();
    try {
      await waitFor('heartbeat_lost', async () => logger.lines.some((l) => l.event === 'heartbeat_lost'), { timeoutMs: 5_000 });
      expect(hb.lostCount).toBe(1);
      expect(logger.lines.find((l) => l.event === 'heartbeat_lost')?.severity).toBe('ERROR');
    } finally {
      await hb.stop(100);
      redis.disconnect();
    }
  });
});
