import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor, workflowRows } from '../../helpers/db.js';
import { startReaper, stepsStartedTwice, waitForLock } from '../../helpers/detection.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { kitEnv } from '../../helpers/kit.js';
import { type PlaneRoles, planeRoles } from '../../helpers/planeRoles.js';
import { testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/** The example app with its kit attached AGENT_ATTACH_DELAY_MS after DBOS.launch() (examples/agent-app/attachLate.ts). */
const AGENT_ATTACH_LATE = fileURLToPath(new URL('../../../dist/examples/agent-app/attachLate.js', import.meta.url));

/**
 * Issue 30: a second process (B) starts with the executor ID of a live one (A) — a duplicated env, a
 * restart that overlaps — and the two are the application's only executors. B's DBOS.launch() re-enqueues
 * A's PENDING work (DBOS recovers its own ID at launch) before B's kit registers; A, still live, may claim
 * it back on its next poll; then B's registration supersedes A, whose kit exits 75. Whatever A claimed is
 * PENDING under an ID that B now holds alive, and DBOS recovers only at launch: before the fix it stayed
 * PENDING through every reaper tick. In the first case B's kit attaches 2 s after its launch, as an app with
 * other startup work would, so that A polls its queue within the overlap (DBOS polls every second) and the
 * case fails on a kit without the fix every time; in the second it attaches at once, as the example app does.
 *
 * With the kit, the overlapping workflow ends SUCCESS within 30 s of A's exit, and B's own work — started
 * before its kit attached, one long step that writes no checkpoint for 12 s — is never re-enqueued (no step
 * of it starts twice). The reaper ticks throughout, as the reaper's role of infra/grants.sql.
 */
const STEPS = 12;
const STEP_MS = 1_000;
const ACCEPT_MS = 30_000;

describe('detection: a second process with a live executor ID', () => {
  const app = uniqueName('app-dupid');
  let tdb: TestDatabase;
  let roles: PlaneRoles | undefined;
  let rt: ReturnType<typeof testRuntime> | undefined;
  const executors: ExecutorHandle[] = [];

  beforeAll(async () => {
    tdb = await createTestDatabase();
    roles = await planeRoles(tdb.url, tdb.sql);
    rt = testRuntime({
      databaseUrl: roles.url('reaper'),
      applicationName: app,
      env: { HEARTBEAT_TTL_MS: '3000', REAPER_TICK_MS: '250', FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' },
    });
  });
  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop()));
    await rt?.close();
    await tdb?.drop();
    await roles?.drop();
  });

  const stepStarted = (wf: string, step: number) =>
    waitFor(`${wf} in step ${step}`, async () => {
      const r = await tdb.sql.query(`SELECT 1 FROM public.step_runs WHERE workflow_id = $1 AND step = $2 AND phase = 'start'`, [wf, step]);
      return (r.rowCount ?? 0) > 0;
    });
  const success = (wf: string, timeoutMs: number) =>
    waitFor(`${wf} SUCCESS`, async () => (await workflowRows(tdb.sql, [wf]))[0]?.status === 'SUCCESS', { timeoutMs, intervalMs: 50 });

  it.each<{ when: string; executorId: string; script: string | undefined; env: Record<string, string> }>([
    {
      when: '2 s after its launch',
      executorId: 'dup-late',
      script: AGENT_ATTACH_LATE,
      env: { AFTERLIFE_KIT: 'off', AGENT_ATTACH_DELAY_MS: '2000' },
    },
    // As the example app does: A then claims in about half the runs (its poll within the ~0.2-1.2 s before its fence question).
    { when: 'right after its launch', executorId: 'dup-now', script: undefined, env: {} },
  ])(
    "B's kit attaches $when: the overlapping workflow ends SUCCESS within 30 s of A's exit; B's own work is untouched",
    { timeout: 150_000 },
    async ({ executorId, script, env }) => {
      if (!rt) throw new Error('no runtime');
      const start = (o: { script?: string | undefined; env?: Record<string, string> }) =>
        startExecutor({
          databaseUrl: tdb.url,
          applicationName: app,
          applicationVersion: 'v1',
          executorId,
          env: kitEnv({ ttlMs: 3_000, env: o.env ?? {} }),
          ...(o.script ? { script: o.script } : {}),
        }).then((e) => (executors.push(e), e));

      const a = await start({});
      await waitForLock(tdb.sql, app, executorId);
      const wf = `${executorId}-overlap`;
      await a.start(wf, { steps: STEPS, stepMs: STEP_MS });
      await stepStarted(wf, 2);

      const reaper = startReaper(testReaperDeps(rt));
      try {
        const b = await start({ script, env });
        // B's own work (with the late attach, before its kit attaches): one long step, nothing checkpointed for 12 s.
        const own = `${executorId}-own`;
        await b.start(own, { steps: 1, stepMs: 12_000 });

        const { code } = await a.exited;
        const exitedAt = Date.now();
        expect(code).toBe(75);
        expect(a.output.join('')).toContain('"verdict":"superseded"');

        await success(wf, ACCEPT_MS);
        const tookMs = Date.now() - exitedAt;
        const out = b.output.join('');
        console.log(
          `[detection:duplicate-id] kit ${script ? 'late' : 'at once'}: A exited 75; ${wf} SUCCESS ${tookMs} ms later` +
            ` (B's kit re-enqueued what A left: ${out.includes('superseded_work_recovered') ? 'yes' : 'no, B had claimed it'})`,
        );

        await success(own, 30_000);
        expect(await stepsStartedTwice(tdb.sql, [own])).toEqual([]);
        // B runs on: never fenced, registered alive under its own incarnation, the superseded record cleared.
        expect(b.child.exitCode).toBeNull();
        expect(out).not.toContain('executor_fenced');
        const reg = await tdb.sql.query<{ state: string; superseded_incarnation: string | null }>(
          `SELECT state, superseded_incarnation FROM afterlife.executors WHERE application_name = $1 AND executor_id = $2`,
          [app, executorId],
        );
        expect(reg.rows).toEqual([{ state: 'alive', superseded_incarnation: null }]);
        // Finished under the ID, by B: the only executor of the application left.
        expect((await workflowRows(tdb.sql, [wf, own])).map((r) => r.executor_id)).toEqual([executorId, executorId]);
      } finally {
        const s = await reaper.stop();
        // The reaper never judged the ID dead: B holds it alive throughout (the previous case's, killed, it may).
        expect(s.declaredDead).not.toContain(executorId);
        // A and B stay the application's only executors: none of this case's is left for the next.
        await Promise.all(executors.splice(0).map((e) => e.stop()));
      }
    },
  );
});
