import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { registerAlive, setState } from '../../../packages/executor/src/db/queries/executors.js';
import { Heartbeat } from '../../../packages/executor/src/runtime/heartbeat.js';
import { LivenessLock } from '../../../packages/executor/src/runtime/liveness.js';
import type { FenceVerdict } from '../../../packages/executor/src/contract/fenceCheck.js';
import { askFence, readLiveness } from '../../../packages/executor/src/db/queries/liveness.js';
import { LEGACY_LIVENESS_KEY_SQL, LIVENESS_KEY_SQL, livenessHeldSql } from '../../../packages/executor/src/contract/livenessKey.js';
import { createRedis } from '../../../packages/executor/src/lock/redis.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { holdLiveness, registerIncarnation } from '../../helpers/liveness.js';
import { type PlaneRoles, planeRoles } from '../../helpers/planeRoles.js';

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
  const dropRoles: PlaneRoles[] = [];
  afterAll(async () => {
    await db?.pool.end();
    await tdb?.drop();
    for (const r of dropRoles) await r.drop();
  });

  const register = (executorId: string, incarnation: string) => registerIncarnation(db, app, executorId, incarnation);

  let n = 0;
  /** A kit's liveness module as attach wires it: its own incarnation, registered before it takes the lock. */
  const lock = (
    executorId: string,
    onFenced: (v: FenceVerdict) => void = () => undefined,
    logger = memoryLogger(),
    o: { leaseMs?: number; checkEveryMs?: number } = {},
  ) => {
    const incarnation = `inc${++n}`;
    return new LivenessLock({
      databaseUrl: tdb.url,
      applicationName: app,
      executorId,
      afterlifeSchema: 'afterlife',
      since: new Date(),
      incarnation,
      register: async () => {
        await register(executorId, incarnation);
      },
      logger,
      onFenced,
      checkEveryMs: o.checkEveryMs ?? 200,
      ...(o.leaseMs ? { leaseMs: o.leaseMs } : {}),
    });
  };

  it('held while the session lives, free the moment it ends, taken back after a terminated session', async () => {
    const l = lock('exec-a');
    await l.start();
    try {
      expect(l.held).toBe(true);
      expect((await readLiveness(db, app, ['exec-a', 'exec-b'])).held).toEqual(new Set(['exec-a']));
      // Another app's executor of the same ID is another lock.
      expect((await readLiveness(db, `${app}-other`, ['exec-a'])).held.size).toBe(0);

      const killed = await tdb.sql.query<{ ok: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name LIKE 'afterlife_live_exec-a@%' AND datname = current_database()`,
      );
      expect(killed.rows.map((r) => r.ok)).toEqual([true]);
      const t0 = Date.now();
      await waitFor('the lock taken back', async () => (await readLiveness(db, app, ['exec-a'])).held.has('exec-a'), {
        timeoutMs: 10_000,
        intervalMs: 20,
      });
      console.log(`[liveness] lock taken back ${Date.now() - t0} ms after pg_terminate_backend`);
    } finally {
      await l.close();
    }
    await waitFor('free once closed', async () => (await readLiveness(db, app, ['exec-a'])).held.size === 0, { timeoutMs: 5_000 });
  });

  it('a recovery about an earlier incarnation of the ID fences nobody here; one about this incarnation, or about none, does', async () => {
    // Issue 30: a process that superseded a live one with its ID must not exit because the earlier one's work was recovered.
    const executorId = 'exec-fence-inc';
    await register(executorId, 'inc-new');
    const since = new Date(Date.now() - 60_000);
    const recovery = async (incarnation: string | null) => {
      const r = await tdb.sql.query<{ id: string }>(
        `INSERT INTO afterlife.recoveries (application_name, executor_id, reason, detected_by, recovered_by, lock_mode, incarnation)
         VALUES ($1, $2, 'manual', 'test', 'test', 'locked', $3) RETURNING id`,
        [app, executorId, incarnation],
      );
      await tdb.sql.query(
        `INSERT INTO afterlife.recovery_batches (recovery_id, batch_no, application_version, workflow_ids) VALUES ($1, 1, 'v1', ARRAY['wf-moved'])`,
        [r.rows[0]?.id],
      );
      return r.rows[0]?.id;
    };
    const client = new pg.Client({ connectionString: tdb.url });
    await client.connect();
    const ask = () => askFence(client, 'afterlife', { applicationName: app, executorId, since, incarnation: 'inc-new' });
    try {
      const earlier = await recovery('inc-old');
      expect(await ask()).toBeNull();
      for (const about of [null, 'inc-new']) {
        const id = await recovery(about);
        expect(await ask()).toMatchObject({ verdict: 'moved', moved: 1 });
        await tdb.sql.query(`DELETE FROM afterlife.recoveries WHERE id = $1`, [id]);
      }
      // Without an incarnation of its own (a caller that never registered), every recovery of the ID counts.
      expect(await askFence(client, 'afterlife', { applicationName: app, executorId, since })).toMatchObject({ verdict: 'moved' });
      await tdb.sql.query(`DELETE FROM afterlife.recoveries WHERE id = $1`, [earlier]);
    } finally {
      await client.end();
    }
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
    const l = lock('exec-lease', () => undefined, memoryLogger(), { leaseMs: 3_000, checkEveryMs: 60_000 });
    await l.start();
    try {
      expect(l.leaseMs).toBe(3_000);
      const pid = await waitFor('the lease session', async () => {
        const r = await tdb.sql.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'afterlife_live_exec-lease@%' AND datname = current_database()`,
        );
        return r.rows[0]?.pid;
      });
      const t0 = Date.now();
      await waitFor(
        'the server ends the silent session',
        async () => {
          const r = await tdb.sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [pid]);
          return r.rowCount === 0;
        },
        { timeoutMs: 10_000, intervalMs: 50 },
      );
      const endedMs = Date.now() - t0;
      console.log(`[liveness] a session silent for its 3000 ms lease ended ${endedMs} ms after it was first seen`);
      expect(endedMs).toBeLessThan(3_000 + 2_000);
      await waitFor(
        'the lock taken back on a new session',
        async () => (await readLiveness(db, app, ['exec-lease'])).held.has('exec-lease'),
        { timeoutMs: 10_000 },
      );
    } finally {
      await l.close();
    }
  });

  it('an idle_session_timeout set in the URL is kept when shorter and keepable, replaced (loudly) when unsafe', async () => {
    const url = (ms: number) =>
      `${tdb.url}${tdb.url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c idle_session_timeout=${ms}`)}`;
    const logger = memoryLogger();
    const kept = new LivenessLock({
      databaseUrl: url(5_000),
      applicationName: app,
      executorId: 'exec-url',
      afterlifeSchema: 'afterlife',
      since: new Date(),
      logger,
      onFenced: () => undefined,
    });
    const unsafe = new LivenessLock({
      databaseUrl: url(1_000),
      applicationName: app,
      executorId: 'exec-url2',
      afterlifeSchema: 'afterlife',
      since: new Date(),
      logger,
      onFenced: () => undefined,
    });
    await Promise.all([kept.start(), unsafe.start()]);
    try {
      expect(kept.held && unsafe.held).toBe(true);
      expect(kept.leaseMs).toBe(5_000);
      expect(unsafe.leaseMs).toBe(8_000);
      expect(
        logger.lines
          .filter((x) => x.event === 'liveness_lease')
          .map((x) => x.severity)
          .sort(),
      ).toEqual(['NOTICE', 'WARNING']);
    } finally {
      await Promise.all([kept.close(), unsafe.close()]);
    }
  });

  /** A login role with no grants at all: what "anyone with a database login" can do (issue 23). */
  const stranger = async () => {
    const role = `stranger_${process.pid}_${++n}`;
    await tdb.sql.query(`CREATE ROLE ${role} LOGIN`);
    const u = new URL(tdb.url);
    u.username = role;
    u.password = '';
    const c = new pg.Client({ connectionString: u.toString() });
    await c.connect();
    return {
      c,
      drop: async () => {
        await c.end().catch(() => undefined);
        await tdb.sql.query(`DROP ROLE IF EXISTS ${role}`);
      },
    };
  };

  it('a forged fence NOTIFY from a role with no grants is only a hint: the registry says alive, so the kit keeps running', async () => {
    let fenced: FenceVerdict | undefined;
    const l = lock('exec-n', (v) => (fenced ??= v));
    await l.start();
    const s = await stranger();
    try {
      expect(l.held).toBe(true);
      const denied = await s.c.query(`SELECT 1 FROM afterlife.executors`).then(
        () => false,
        () => true,
      );
      expect(denied).toBe(true);
      const sent = (await tdb.sql.query<{ at: Date }>('SELECT clock_timestamp() AS at')).rows[0]?.at;
      await s.c.query(`SELECT pg_notify('afterlife_fence', $1)`, [JSON.stringify({ applicationName: app, executorId: 'exec-n' })]);
      // The hint makes it ask its records: the fence question, seen finished on its session after the hint, and
      // a later word begun on the same session (the kit asks one thing at a time, so the answer was acted on).
      const session = `SELECT query, query_start, state FROM pg_stat_activity WHERE application_name LIKE 'afterlife_live_exec-n@%' AND datname = current_database()`;
      const asked = await waitFor(
        'the fence question asked after the hint',
        async () => {
          const [row] = (await tdb.sql.query<{ query: string; query_start: Date; state: string }>(session)).rows;
          return row && sent && row.query_start > sent && row.state === 'idle' && row.query.startsWith('SELECT CASE')
            ? row.query_start
            : undefined;
        },
        { intervalMs: 10, timeoutMs: 10_000 },
      );
      await waitFor('a word after the answer', async () => {
        const [row] = (await tdb.sql.query<{ query_start: Date }>(session)).rows;
        return row && row.query_start > asked;
      });
      expect(fenced).toBeUndefined();
      expect(l.held).toBe(true);
      expect((await readLiveness(db, app, ['exec-n'])).held.has('exec-n')).toBe(true);
    } finally {
      await s.drop();
      await l.close();
    }
  });

  it('a squatted liveness key is reported, never read as life; the kit takes it once the squatter goes', async () => {
    const s = await stranger();
    const logger = memoryLogger();
    const l = lock('exec-sq', () => undefined, logger);
    try {
      // The squatter computes the key (it is no secret) and takes it before the kit starts.
      await s.c.query(`SELECT pg_advisory_lock(${LIVENESS_KEY_SQL.key('$1::text', '$2::text')})`, [app, 'exec-sq']);
      await l.start();
      expect(l.held).toBe(false);
      expect(logger.lines.some((x) => x.event === 'liveness_lock_busy')).toBe(true);
      const r = await readLiveness(db, app, ['exec-sq']);
      expect(r.held.has('exec-sq')).toBe(false);
      expect(r.squatted.has('exec-sq')).toBe(true);
      await s.c.end();
      await waitFor('the kit takes its lock', async () => l.held, { timeoutMs: 5_000 });
      const after = await readLiveness(db, app, ['exec-sq']);
      expect([after.held.has('exec-sq'), after.squatted.has('exec-sq')]).toEqual([true, false]);
    } finally {
      await s.drop();
      await l.close();
    }
  });

  it("a backend that got the dead kit's pid is not its holder: a login with no grants, or the kit's own role in a later session", async () => {
    // The plane's roles as infra/grants.sql makes them: the reaper (with pg_read_all_stats) and executorDeath
    // (without: it cannot see other roles' backend start times) each read the holder.
    const roles = await planeRoles(tdb.url, tdb.sql);
    dropRoles.push(roles);
    const readers = { reaper: afterlifeDb(roles.url('reaper')), executorDeath: afterlifeDb(roles.url('executor_death')) };
    const nobody = new pg.Client({ connectionString: roles.url('nobody') });
    const again = new pg.Client({ connectionString: tdb.url });
    const id = 'exec-pid';
    const kit = await holdLiveness(db, tdb.url, { applicationName: app, executorId: id, incarnation: 'inc-pid' });
    try {
      expect(kit.took[0]).toEqual({ ok: true, recorded: true });
      for (const r of Object.values(readers)) expect((await readLiveness(r, app, [id])).held.has(id)).toBe(true);
      await kit.session.end(); // the kit dies
      await Promise.all([nobody.connect(), again.connect()]);
      // Pid reuse cannot be forced from a test; its outcome can: the registry names a backend that is now
      // someone else's and holds the key. First a login with no grants, then a later session of the kit's role.
      for (const [who, c] of [
        ['a login with no grants', nobody],
        ["the kit's role, a later session", again],
      ] as const) {
        const pid = (await c.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`)).rows[0]?.pid;
        await c.query(`SELECT pg_advisory_lock(${LIVENESS_KEY_SQL.key('$1::text', '$2::text')})`, [app, id]);
        await tdb.sql.query(`UPDATE afterlife.executors SET liveness_pid = $3 WHERE application_name = $1 AND executor_id = $2`, [
          app,
          id,
          pid,
        ]);
        // The kit's own role is told apart by its start time, which only a reader with pg_read_all_stats sees.
        const tellers = who === 'a login with no grants' ? readers : { reaper: readers.reaper };
        for (const [name, r] of Object.entries(tellers)) {
          const seen = await readLiveness(r, app, [id]);
          expect({ who, name, held: seen.held.has(id), squatted: seen.squatted.has(id) }).toEqual({
            who,
            name,
            held: false,
            squatted: true,
          });
        }
        const inBatch = await tdb.sql.query<{ held: boolean }>(`SELECT ${livenessHeldSql('afterlife', '$1::text', '$2::text')} AS held`, [
          app,
          id,
        ]);
        expect({ who, held: inBatch.rows[0]?.held }).toEqual({ who, held: false });
        await c.query(`SELECT pg_advisory_unlock_all()`);
      }
    } finally {
      await Promise.all([nobody.end(), again.end(), kit.session.end().catch(() => undefined)]);
      await Promise.all(Object.values(readers).map((r) => r.pool.end()));
    }
  });

  it('two IDs that collide under 32-bit hashtext hold separate locks (64-bit keys)', async () => {
    const [a, b] = ['exec-9863923cd615', 'exec-39cac52d2c3c'];
    const legacy = await tdb.sql.query<{ same: boolean }>(
      `SELECT ${LEGACY_LIVENESS_KEY_SQL.executor('$1::text')} = ${LEGACY_LIVENESS_KEY_SQL.executor('$2::text')} AS same`,
      [a, b],
    );
    expect(legacy.rows[0]?.same).toBe(true);
    const la = lock(a);
    const lb = lock(b);
    await Promise.all([la.start(), lb.start()]);
    try {
      expect([la.held, lb.held]).toEqual([true, true]);
      expect((await readLiveness(db, app, [a, b])).held).toEqual(new Set([a, b]));
      await la.close();
      await waitFor(
        'a free, b still held',
        async () => {
          const r = await readLiveness(db, app, [a, b]);
          return !r.held.has(a) && r.held.has(b);
        },
        { timeoutMs: 5_000 },
      );
    } finally {
      await Promise.all([la.close(), lb.close()]);
    }
  });

  it("what reading the holder costs: the reaper's statement over 200 registered holders", async () => {
    // One session holds 200 keys, registered as their holder: the statement's work (pg_locks x registry)
    // without 200 connections.
    const holder = new pg.Client({ connectionString: tdb.url });
    await holder.connect();
    const ids = Array.from({ length: 200 }, (_, i) => `cost-${i}`);
    try {
      const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
      for (const id of ids) {
        await registerAlive(db, {
          applicationName: app,
          executorId: id,
          applicationVersion: 'v1',
          startedAt: new Date(),
          heartbeats: true,
          liveness: true,
          incarnation: `c-${id}`,
        });
      }
      await holder.query(`SELECT pg_advisory_lock(${LIVENESS_KEY_SQL.key('$1::text', 'id')}) FROM unnest($2::text[]) AS id`, [app, ids]);
      await tdb.sql.query(`UPDATE afterlife.executors SET liveness_pid = $1 WHERE application_name = $2 AND executor_id = ANY($3)`, [
        pid,
        app,
        ids,
      ]);
      const time = async (f: () => Promise<unknown>) => {
        const xs: number[] = [];
        for (let i = 0; i < 15; i++) {
          const t = process.hrtime.bigint();
          await f();
          xs.push(Number(process.hrtime.bigint() - t) / 1e6);
        }
        return xs.sort((x, y) => x - y)[7] ?? NaN;
      };
      const withHolder = await time(async () => expect((await readLiveness(db, app, ids)).held.size).toBe(200));
      // The same read without the holder check (any holder of the 64-bit key), for comparison.
      const anyHolder = await time(() =>
        tdb.sql.query(
          `SELECT array_agg(e.id) FROM unnest($2::text[]) AS e(id) WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
             AND l.classid = ((${LIVENESS_KEY_SQL.key('$1::text', 'e.id')} >> 32) & 4294967295)::oid AND l.objid = (${LIVENESS_KEY_SQL.key('$1::text', 'e.id')} & 4294967295)::oid)`,
          [app, ids],
        ),
      );
      console.log(
        `[liveness:cost] 200 holders: the reaper's read with the holder check ${withHolder.toFixed(1)} ms median, any holder ${anyHolder.toFixed(1)} ms`,
      );
    } finally {
      await holder.end();
    }
  });

  it('a heartbeat that cannot be written for a TTL is logged loudly and counted', async () => {
    const logger = memoryLogger();
    const redis = createRedis('redis://127.0.0.1:1');
    const hb = new Heartbeat({
      redis,
      ttlMs: 600,
      intervalMs: 100,
      value: () => ({
        executorId: 'y',
        applicationName: 'x',
        applicationVersion: 'v1',
        state: 'alive',
        startedAt: '',
        beatAt: new Date().toISOString(),
        inFlight: 0,
      }),
      log: logger,
    });
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
