import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { deadExecutorsPass } from '../../../shared/reaper/deadExecutors.js';
import { FULL_CHECK_EVERY_MS, readLocksWatched, watchFleet } from '../../../shared/reaper/fleetView.js';
import type { ReaperState } from '../../../shared/reaper/types.js';
import { budgetUntil } from '../../../shared/lifecycle/deadline.js';
import { holdLiveness } from '../../helpers/liveness.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';

/**
 * The reaper's memory of the fleet between ticks (issue 31, shared/reaper/fleetView.ts): a tick reads what
 * changed, and nothing that changed is missed — a lock that ends, a backend that is no longer the recorded
 * holder, a registry write that commits after the reaper's read.
 */
describe('reaper: the fleet view reads what changed', () => {
  const fx = reaperFixture('app-fleetview', { env: { REAPER_TICK_MS: '250', REAPER_LEASE_MS: '3000' } });
  const ids = Array.from({ length: 12 }, (_, i) => `fv-${i}`);

  it('a quiet tick reports no registry change (an older transaction open in the cluster too) and remembers every holder; an ended session, a changed holder and a late write are each seen', async () => {
    const { rt, tdb, app } = fx;
    const sessions: pg.Client[] = [];
    // A transaction older than every registration, open throughout (as another database's may be in a shared
    // cluster): it holds the snapshot horizon back, so every tick re-reads the rows — still no news.
    const elsewhere = await tdb.sql.connect();
    await elsewhere.query('BEGIN');
    await elsewhere.query('SELECT pg_current_xact_id()');
    try {
      for (const id of ids)
        sessions.push((await holdLiveness(rt.db, tdb.url, { applicationName: app, executorId: id, incarnation: `i-${id}` })).session);
      const deps = testReaperDeps(rt);
      const state: ReaperState = {};
      const tick = async () => {
        const t = await watchFleet(deps, state);
        const registry = new Map([...t.view.live.values()].map((r) => [r.executor_id, r]));
        const locks = await readLocksWatched(deps, t, [...registry.keys()], registry);
        state.fleet = t.view;
        return { t, locks };
      };
      const first = await tick();
      expect(first.t.full).toBe(true);
      expect(first.locks.held.size).toBe(ids.length);
      expect(first.t.view.held.size).toBe(ids.length);

      const quiet = await tick();
      expect(quiet.t.full).toBe(false);
      expect(quiet.t.changed.size).toBe(0);
      expect(quiet.locks.held.size).toBe(ids.length);

      // The session ends: its lock is gone from pg_locks, and the very next tick reads it free.
      await sessions[0]?.end();
      await expect.poll(async () => (await tick()).locks.held.has('fv-0'), { timeout: 5_000 }).toBe(false);

      // A remembered holder that is not the recorded backend any more (a pid reused by another session):
      // the fast check says gone, the full reading decides (here: still held), and memory is corrected.
      const h = state.fleet?.held.get('fv-1');
      expect(h).toBeDefined();
      state.fleet?.held.set('fv-1', { ...(h as NonNullable<typeof h>), started: '2000-01-01 00:00:00+00' });
      const corrected = await tick();
      expect(corrected.locks.held.has('fv-1')).toBe(true);
      expect(state.fleet?.held.get('fv-1')?.started).toBe(h?.started);

      // A registry write that commits after the reaper's read is still read on the tick after it commits.
      const writer = await tdb.sql.connect();
      try {
        await writer.query('BEGIN');
        await writer.query(`UPDATE afterlife.executors SET state = 'draining' WHERE application_name = $1 AND executor_id = 'fv-2'`, [app]);
        const during = await tick();
        expect(during.t.changed.has('fv-2')).toBe(false);
        await writer.query('COMMIT');
      } finally {
        writer.release();
      }
      const after = await tick();
      expect(after.t.changed.has('fv-2')).toBe(true);
      expect(state.fleet?.live.get('fv-2')?.state).toBe('draining');
      expect((await tick()).t.changed.has('fv-3')).toBe(false);
    } finally {
      await elsewhere.query('ROLLBACK').catch(() => undefined);
      elsewhere.release();
      await Promise.all(sessions.map((s) => s.end().catch(() => undefined)));
    }
  });

  it('after the first tick, quiet ticks of the dead pass write no observation row', async () => {
    const { rt, tdb, app } = fx;
    const more = ['fq-0', 'fq-1', 'fq-2'];
    const sessions: pg.Client[] = [];
    try {
      for (const id of more)
        sessions.push((await holdLiveness(rt.db, tdb.url, { applicationName: app, executorId: id, incarnation: `i-${id}` })).session);
      const deps = testReaperDeps(rt);
      const state: ReaperState = {};
      const pass = () =>
        deadExecutorsPass(deps, { tick: 1, dryRun: false, planned: [], budget: budgetUntil(Date.now() + 10_000, Date.now) }, state);
      await pass();
      const versions = async () =>
        (
          await rt.db.query<{ v: string }>(
            `SELECT string_agg(executor_id || ':' || xmin::text || '/' || xmax::text, ',' ORDER BY executor_id) AS v
               FROM afterlife.executor_observations WHERE application_name = $1 AND executor_id = ANY($2)`,
            [app, more],
          )
        ).rows[0]?.v;
      const before = await versions();
      for (let i = 0; i < 3; i++) expect((await pass()).alive).toBeGreaterThanOrEqual(more.length);
      // Not one row rewritten or locked (a locked row gets a new xmax, a rewritten one a new xmin).
      expect(await versions()).toBe(before);
    } finally {
      await Promise.all(sessions.map((s) => s.end().catch(() => undefined)));
    }
  });
  it('a registry row changed behind the stamps is read again within FULL_CHECK_EVERY_MS: its holder is then judged on the row as it is', async () => {
    const { rt, tdb, app } = fx;
    const id = 'fs-0';
    const { session } = await holdLiveness(rt.db, tdb.url, { applicationName: app, executorId: id, incarnation: `i-${id}` });
    try {
      const deps = testReaperDeps(rt);
      const state: ReaperState = {};
      const held = async () => {
        const t = await watchFleet(deps, state);
        const registry = new Map([...t.view.live.values()].map((r) => [r.executor_id, r]));
        const locks = await readLocksWatched(deps, t, [...registry.keys()], registry);
        state.fleet = t.view;
        return locks.held.has(id);
      };
      expect(await held()).toBe(true);
      // The row now names another session as the holder, written with the stamp switched off (as a hand edit,
      // or a database the migration's trigger never reached): the registry delta cannot see it.
      await tdb.sql.query(`ALTER TABLE afterlife.executors DISABLE TRIGGER executors_stamp_change`);
      try {
        await tdb.sql.query(
          `UPDATE afterlife.executors SET liveness_pid = liveness_pid + 100000 WHERE application_name = $1 AND executor_id = $2`,
          [app, id],
        );
      } finally {
        await tdb.sql.query(`ALTER TABLE afterlife.executors ENABLE TRIGGER executors_stamp_change`);
      }
      const t0 = Date.now();
      await expect.poll(held, { timeout: FULL_CHECK_EVERY_MS + 3_000, interval: 250 }).toBe(false);
      expect(Date.now() - t0).toBeLessThanOrEqual(FULL_CHECK_EVERY_MS + 3_000);
    } finally {
      await session.end().catch(() => undefined);
    }
  });
});
