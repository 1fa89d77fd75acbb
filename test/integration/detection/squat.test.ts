import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { LEGACY_LIVENESS_KEY_SQL, LIVENESS_KEY_SQL } from '../../../packages/executor/src/contract/livenessKey.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { startReaper, waitForLock } from '../../helpers/detection.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';

/**
 * Liveness keys a stranger cannot hide a death behind (issue 23, obs. 3), with real DBOS executors, the kit
 * and a real reaper:
 *   - a login role with no grants takes an executor's liveness key before the executor starts and keeps
 *     it: the executor runs (its lock busy, reported), is SIGKILLed, and is still declared dead and recovered —
 *     a lock held by something other than the kit's registered session is no evidence of life;
 *   - two executor IDs whose 32-bit `hashtext` collide: with one SIGKILLed and its twin alive, the dead one
 *     is declared and recovered (64-bit keys, separate locks) while the twin is left alone.
 */
describe('detection: squatted and colliding liveness keys', () => {
  const fx = reaperFixture('app-squat', { env: { REAPER_TICK_MS: '250', FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' } });
  const dead = (id: string) =>
    waitFor(
      `${id} declared dead`,
      async () => {
        const r = await fx.tdb.sql.query<{ at: Date }>(
          `SELECT state_changed_at AS at FROM afterlife.executors WHERE application_name = $1 AND executor_id = $2 AND state = 'dead'`,
          [fx.app, id],
        );
        return r.rows[0]?.at.getTime();
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
  const running = (id: string, ids: string[]) =>
    waitFor(`${ids.join(', ')} in a step on ${id}`, async () => {
      const r = await fx.tdb.sql.query<{ n: number }>(
        `SELECT count(DISTINCT workflow_id)::int AS n FROM public.step_runs WHERE phase = 'start' AND executor_id = $1 AND workflow_id = ANY($2)`,
        [id, ids],
      );
      return r.rows[0]?.n === ids.length;
    });

  it('a squatter holding the key does not keep a SIGKILLed executor alive', { timeout: 90_000 }, async () => {
    const { tdb, app, rt } = fx;
    const role = `squatter_${process.pid}`;
    await tdb.sql.query(`CREATE ROLE ${role} LOGIN`);
    const u = new URL(tdb.url);
    u.username = role;
    const squatter = new pg.Client({ connectionString: u.toString() });
    await squatter.connect();
    try {
      await squatter.query(`SELECT pg_advisory_lock(${LIVENESS_KEY_SQL.key('$1::text', '$2::text')})`, [app, 'sq']);
      const victim = await fx.executor('sq', { beat: true });
      await fx.executor('heir-sq', { beat: true });
      const ids = ['sq-1', 'sq-2'];
      for (const id of ids) await victim.start(id, { steps: 2, stepMs: 3_000 });
      await running('sq', ids);
      expect(victim.output.join('')).toContain('liveness_lock_busy');
      const reaper = startReaper(testReaperDeps(rt, { logger: rt.logger }));
      try {
        victim.kill('SIGKILL');
        const killedAt = Date.now();
        await victim.exited;
        const at = await dead('sq');
        console.log(`[detection:squat] squatted key; SIGKILLed executor declared dead ${at - killedAt} ms after the kill`);
        await waitFor(
          'its workflows finish elsewhere',
          async () => (await workflowRows(tdb.sql, ids)).every((w) => w.status === 'SUCCESS' && w.executor_id !== 'sq'),
          { timeoutMs: 45_000 },
        );
        expect(rt.logger.lines.some((l) => l.event === 'liveness_lock_squatted' && l.executorId === 'sq')).toBe(true);
      } finally {
        await reaper.stop().catch(() => undefined);
      }
    } finally {
      await squatter.end().catch(() => undefined);
      await tdb.sql.query(`DROP ROLE IF EXISTS ${role}`);
    }
  });

  it('of two IDs colliding under hashtext, the SIGKILLed one is declared dead while its twin lives', { timeout: 90_000 }, async () => {
    const { tdb, app, rt } = fx;
    const [a, b] = ['exec-9863923cd615', 'exec-39cac52d2c3c'];
    const same = await tdb.sql.query<{ same: boolean }>(
      `SELECT ${LEGACY_LIVENESS_KEY_SQL.executor('$1::text')} = ${LEGACY_LIVENESS_KEY_SQL.executor('$2::text')} AS same`,
      [a, b],
    );
    expect(same.rows[0]?.same).toBe(true);
    const victim = await fx.executor(a, { beat: true });
    await fx.executor(b, { beat: true });
    await waitForLock(tdb.sql, app, a);
    await waitForLock(tdb.sql, app, b);
    const ids = ['twin-1', 'twin-2'];
    for (const id of ids) await victim.start(id, { steps: 2, stepMs: 3_000 });
    await running(a, ids);
    const reaper = startReaper(testReaperDeps(rt));
    try {
      victim.kill('SIGKILL');
      const killedAt = Date.now();
      await victim.exited;
      const at = await dead(a);
      console.log(`[detection:collision] ${a} declared dead ${at - killedAt} ms after the kill while its hashtext twin ${b} lives`);
      await waitFor(
        'its workflows finish elsewhere',
        async () => (await workflowRows(tdb.sql, ids)).every((w) => w.status === 'SUCCESS' && w.executor_id !== a),
        { timeoutMs: 45_000 },
      );
      const twin = await tdb.sql.query<{ state: string }>(
        `SELECT state FROM afterlife.executors WHERE application_name = $1 AND executor_id = $2`,
        [app, b],
      );
      expect(twin.rows).toEqual([{ state: 'alive' }]);
    } finally {
      await reaper.stop().catch(() => undefined);
    }
  });
});
