import { describe, expect, it } from 'vitest';
import { runReaper } from '../../../shared/reaper/index.js';
import type { TickResult } from '../../../shared/reaper/types.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';

/**
 * A long step is not a death (the one long test): through 60 s of 1 s ticks, a live executor running a 60 s step — which
 * writes nothing to DBOS's tables while it runs — is never declared dead and its workflow never touched.
 * A second live executor without the kit runs the same step with a grace far shorter than the step: its
 * workflow's activity clock goes stale, but its sessions are in pg_stat_activity, so it is alive too.
 */
/** Longer than the 60 s of ticks, so every tick happens while the step runs (and writes nothing). */
const STEP_MS = 70_000;

describe('reaper: a live executor in a 60 s step', () => {
  const fx = reaperFixture('app-long', { env: { FUNCTION_TIMEOUT_S: '62', BUDGET_MARGIN_MS: '1500', UNKNOWN_EXECUTOR_GRACE_MS: '5000' } });

  it('never declared dead, its workflow never touched', { timeout: 150_000 }, async () => {
    const { tdb, rt } = fx;
    const kit = await fx.executor('exec-kit', { beat: true });
    const noKit = await fx.executor('exec-nokit');
    await kit.start('long-kit', { steps: 1, stepMs: STEP_MS });
    await noKit.start('long-nokit', { steps: 1, stepMs: STEP_MS });
    const ids = ['long-kit', 'long-nokit'];
    const before = await tdb.sql.query(
      `SELECT workflow_uuid, status, executor_id, owner_xid, recovery_attempts, updated_at FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) ORDER BY 1`,
      [ids],
    );

    const t0 = Date.now();
    const results: TickResult[] = [];
    const summary = await runReaper(testReaperDeps(rt), { onTick: (r) => results.push(r) });
    const ranMs = Date.now() - t0;
    if (summary.outcome !== 'completed') throw new Error('reaper skipped');
    console.log(`[long step] ${summary.ticks} ticks over ${ranMs} ms; dead pass max ${summary.passes.dead.maxDurationMs} ms`);
    expect(ranMs).toBeGreaterThanOrEqual(58_000);
    expect(summary.ticks).toBeGreaterThanOrEqual(55);
    expect(summary.declaredDead).toEqual([]);
    expect(summary.errors).toEqual([]);
    expect(summary.sessions).toBe('visible');
    // Every tick saw both executors, and judged both alive.
    const ticks = results.map((r) => r.dead as { candidates: number; alive: number });
    expect(ticks).toHaveLength(summary.ticks);
    expect(ticks.every((d) => d.candidates === 2 && d.alive === 2)).toBe(true);

    // Untouched while the step ran: same status, owner, ownership token, attempts and status clock.
    const during = await tdb.sql.query(
      `SELECT workflow_uuid, status, executor_id, owner_xid, recovery_attempts, updated_at FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) ORDER BY 1`,
      [ids],
    );
    expect(during.rows).toEqual(before.rows);
    expect((await tdb.sql.query(`SELECT count(*)::int AS n FROM afterlife.recoveries`)).rows[0]).toEqual({ n: 0 });

    // Both finish on their own executor, each step body ran exactly once.
    await waitFor('both long workflows finish', async () => (await workflowRows(tdb.sql, ids)).every((r) => r.status === 'SUCCESS'), {
      timeoutMs: 30_000,
    });
    const runs = await tdb.sql.query(
      `SELECT workflow_id, executor_id, count(*)::int AS n FROM public.step_runs WHERE phase = 'start' GROUP BY 1, 2 ORDER BY 1`,
    );
    expect(runs.rows).toEqual([
      { workflow_id: 'long-kit', executor_id: 'exec-kit', n: 1 },
      { workflow_id: 'long-nokit', executor_id: 'exec-nokit', n: 1 },
    ]);
  });
});
