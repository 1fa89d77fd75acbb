import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { setState } from '../../../packages/executor/src/db/queries/executors.js';
import { readTimeline } from '../../../shared/db/queries/readTimeline.js';
import { runReaper } from '../../../shared/reaper/index.js';
import { timelineView } from '../../../shared/timeline/view.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type PythonExecutor, pythonSkip, startPythonExecutor } from '../../helpers/pythonExecutor.js';
import { testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Real DBOS for Python 2.30.0 apps without the kit, under the real reaper. DBOS for Python names every
 * session plain `dbos_transact`, so the plane cannot tell its executors apart: a live instance in a step
 * longer than UNKNOWN_EXECUTOR_GRACE_MS must never be declared dead (it was, and the step ran again beside
 * itself), and the reaper says why. With the sessions named per executor (the one line docs/reaper.md
 * gives), a SIGKILLed instance is recovered and the live one is not, and the timeline starts at the dead
 * one's last session. An ID once declared dead is not then judged by a heartbeat it never writes.
 */
const noPython = pythonSkip('DBOS for Python without the kit');

describe.skipIf(noPython)('DBOS for Python without the kit', () => {
  let tdb: TestDatabase;
  const apps: PythonExecutor[] = [];
  const runtimes: Array<ReturnType<typeof testRuntime>> = [];

  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.stop()));
    await Promise.all(runtimes.splice(0).map((r) => r.close()));
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  const plane = (app: string, env: Record<string, string>, redis: 'none' | undefined = 'none') => {
    const rt = testRuntime({
      databaseUrl: tdb.url,
      applicationName: app,
      ...(redis ? { redis } : {}),
      env: { REAPER_TICK_MS: '250', STUCK_AFTER_MS: '86400000', FUNCTION_TIMEOUT_S: '600', ...env },
    });
    runtimes.push(rt);
    return rt;
  };
  const start = async (app: string, executorId: string, env: Record<string, string> = {}) => {
    // DBOS 2.30 refuses a version another application in the database registered: one per test's app.
    const a = await startPythonExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      executorId,
      applicationVersion: `v-${app}`,
      kit: false,
      env,
    });
    apps.push(a);
    return a;
  };
  /** How many times each step body started, per workflow and step (the app's own record, outside DBOS). */
  const stepRuns = async (app: string) =>
    (
      await tdb.sql.query<{ workflow_id: string; step: number; n: number }>(
        `SELECT s.workflow_id, s.step, count(*)::int AS n FROM public.step_runs s JOIN dbos.workflow_status w ON w.workflow_uuid = s.workflow_id
          WHERE w.application_name = $1 AND s.phase = 'start' GROUP BY s.workflow_id, s.step`,
        [app],
      )
    ).rows;
  const statuses = async (app: string) =>
    (await tdb.sql.query<{ status: string }>(`SELECT status FROM dbos.workflow_status WHERE application_name = $1`, [app])).rows.map(
      (r) => r.status,
    );

  it("DBOS's own session names: a live instance in a step 4× the grace is never declared, its step runs once, and the reaper names the fix", async () => {
    const app = uniqueName('py-plain');
    const rt = plane(app, { UNKNOWN_EXECUTOR_GRACE_MS: '3000' });
    const a = await start(app, 'py-plain-a');
    await start(app, 'py-plain-b');
    await start(app, 'py-plain-c');
    await a.start('plain-1', { steps: 1, stepMs: 12_000 });
    await a.start('plain-2', { steps: 1, stepMs: 12_000 });
    const reaping = runReaper(testReaperDeps(rt), { maxTicks: 64 }); // 16 s: past the 12 s steps and 4× the grace
    const warned = await waitFor('sessions_unattributed', async () => rt.logger.lines.find((l) => l.event === 'sessions_unattributed'), {
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    expect(String(warned.fix)).toMatch(/attach_executor\(\)/);
    const summary = await reaping;
    if (summary.outcome !== 'completed') throw new Error(summary.reason);
    expect(summary.declaredDead).toEqual([]);
    expect(summary.sessions).toBe('unknown');
    await waitFor('both workflows done', async () => (await statuses(app)).every((s) => s === 'SUCCESS') || undefined, {
      timeoutMs: 30_000,
    });
    const runs = await stepRuns(app);
    expect(runs).toHaveLength(2);
    expect(runs.every((r) => r.n === 1)).toBe(true);
  });

  it('sessions named per executor: a SIGKILLed instance is recovered, the live one never, and the timeline starts at its last session', async () => {
    const app = uniqueName('py-named');
    const rt = plane(app, { UNKNOWN_EXECUTOR_GRACE_MS: '1000' });
    const named = { NAME_SESSIONS: '1' };
    const victim = await start(app, 'py-named-a', named);
    const live = await start(app, 'py-named-b', named);
    await victim.start('named-1', { steps: 3, stepMs: 1_000 });
    await victim.start('named-2', { steps: 3, stepMs: 1_000 });
    await live.start('named-live', { steps: 1, stepMs: 8_000 });
    await waitFor('the victim is in its second step', async () => (await stepRuns(app)).some((r) => r.step === 1) || undefined, {
      timeoutMs: 20_000,
    });
    const reaping = runReaper(testReaperDeps(rt), { maxTicks: 48 });
    await waitFor("the reaper saw the victim's sessions", async () => {
      const r = await tdb.sql.query(
        `SELECT 1 FROM afterlife.executor_observations WHERE application_name = $1 AND executor_id = 'py-named-a'`,
        [app],
      );
      return r.rowCount || undefined;
    });
    victim.kill('SIGKILL');
    const killedAt = Date.now();
    await victim.exited;
    const summary = await reaping;
    if (summary.outcome !== 'completed') throw new Error(summary.reason);
    expect(summary.declaredDead).toEqual(['py-named-a']);
    await waitFor('every workflow done elsewhere', async () => (await statuses(app)).every((s) => s === 'SUCCESS') || undefined, {
      timeoutMs: 30_000,
    });
    // The live instance's 8 s step ran once.
    expect((await stepRuns(app)).filter((r) => r.workflow_id === 'named-live').map((r) => r.n)).toEqual([1]);
    await runReaper(testReaperDeps(rt), { maxTicks: 8 }); // the timeline pass closes the death
    const db = afterlifeDb(tdb.url);
    try {
      const row = await readTimeline(db, app, { executorId: 'py-named-a' });
      if (!row) throw new Error('no timeline');
      const t = timelineView(row);
      expect(t.cause).toBe('vanished');
      expect(t.lastSignOfLifeSource).toBe('session');
      // The last session the plane saw is within a few ticks of the kill.
      expect(Math.abs(Date.parse(t.lastSignOfLifeAt ?? '') - killedAt)).toBeLessThan(600);
      // The first step elsewhere is DBOS's own record of it.
      const first = await tdb.sql.query<{ ms: string }>(
        `SELECT min(o.started_at_epoch_ms)::text AS ms FROM dbos.operation_outputs o
          WHERE o.workflow_uuid IN ('named-1', 'named-2') AND o.started_at_epoch_ms >= $1`,
        [killedAt],
      );
      expect(Math.abs(Date.parse(t.firstStepElsewhereAt ?? '') - Number(first.rows[0]?.ms))).toBeLessThanOrEqual(150);
      expect(t.deathToFirstStepMs).toBeGreaterThanOrEqual(0);
    } finally {
      await db.end();
    }
  });

  it('an ID declared dead once: its next live process is never judged by a heartbeat it never wrote', async () => {
    const app = uniqueName('py-again');
    const rt = plane(app, { UNKNOWN_EXECUTOR_GRACE_MS: '600000' }, undefined);
    const db = afterlifeDb(tdb.url);
    try {
      // What a declaration of an earlier process with this ID wrote.
      await setState(db, { applicationName: app, executorId: 'py-again-1', state: 'dead', reason: 'heartbeat-lapsed', detectedBy: 'test' });
    } finally {
      await db.end();
    }
    const again = await start(app, 'py-again-1', { NAME_SESSIONS: '1' });
    await again.start('again-1', { steps: 1, stepMs: 6_000 });
    const summary = await runReaper(testReaperDeps(rt), { maxTicks: 16 });
    if (summary.outcome !== 'completed') throw new Error(summary.reason);
    expect(summary.declaredDead).toEqual([]);
    expect(summary.passes.dead.alive).toBeGreaterThan(0);
  });
});
