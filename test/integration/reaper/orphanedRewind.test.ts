import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runReaper, type ReaperSummary } from '../../../shared/reaper/index.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { makeOrphans, orphanThroughRecovery, waitAllSuccess } from '../../helpers/agents.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { kitEnv } from '../../helpers/kit.js';
import { testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * ORPHANED_VERSION_POLICY=fork-to-latest under REPAIR_MODE=rewind (the default): rows of a dead v1
 * executor, re-enqueued while only v2 lives, are cancelled and rewound onto v2 under their own IDs and
 * finish there. A reaper that dies between the cancel and the rewind leaves a claim the next pass
 * finishes once stale (backdated, not slept).
 */
type Completed = Extract<ReaperSummary, { outcome: 'completed' }>;
const IDS = ['orw-0', 'orw-1', 'orw-crash'];

describe('reaper: orphaned versions rewound onto the latest version', () => {
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;
  const faults = new FaultInjector();
  const executors: ExecutorHandle[] = [];
  const app = uniqueName('app-orphrw');
  const rows = async () =>
    (
      await tdb.sql.query(
        `SELECT workflow_uuid, status, application_version, executor_id FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) ORDER BY 1`,
        [IDS],
      )
    ).rows;
  const reap = async (): Promise<Completed> => {
    const s = await runReaper(testReaperDeps(rt), { maxTicks: 1 });
    if (s.outcome !== 'completed') throw new Error(`reaper skipped: ${s.reason}`);
    return s;
  };

  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = testRuntime({ databaseUrl: tdb.url, applicationName: app, faults, env: { ORPHANED_VERSION_POLICY: 'fork-to-latest' } });
    await makeOrphans({
      databaseUrl: tdb.url,
      sql: tdb.sql,
      applicationName: app,
      executorId: 'exec-v1',
      applicationVersion: 'v1',
      ids: IDS,
      stepMs: 1_500,
    });
    await waitFor('the stopped v1 executor has no sessions left', async () => {
      const r = await tdb.sql.query(`SELECT 1 FROM pg_stat_activity WHERE starts_with(application_name, 'dbos_transact_exec-v1_')`);
      return r.rowCount === 0;
    });
    const v2 = await startExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      applicationVersion: 'v2',
      executorId: 'exec-v2',
      env: kitEnv({ ttlMs: 15_000 }),
    });
    executors.push(v2);
    const summary = await orphanThroughRecovery(rt, { applicationName: app, deadExecutorId: 'exec-v1', liveExecutorId: 'exec-v2' });
    expect(summary.versionsWithoutExecutor).toEqual(['v1']);
    // Untouched for longer than ORPHANED_VERSION_GRACE_MS (database clock, as DBOS writes updated_at).
    await tdb.sql.query(`UPDATE dbos.workflow_status SET updated_at = updated_at - 360000 WHERE workflow_uuid = ANY($1)`, [IDS]);
  }, 120_000);
  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop()));
    await rt?.close();
    await tdb?.drop();
  });

  it(
    'rewinds them onto v2 under their own IDs; they finish on v2; a crash after the cancel is finished by a later pass',
    { timeout: 90_000 },
    async () => {
      faults.on('rewind.afterCancel', (ctx) => {
        if (ctx.workflowId === 'orw-crash') throw new Error('injected: reaper died between the cancel and the rewind');
      });
      const s = await reap();
      faults.off('rewind.afterCancel');
      expect(s.passes.orphaned).toMatchObject({ found: 3, forked: 2, failed: 1 });
      await waitAllSuccess(tdb.sql, ['orw-0', 'orw-1'], 60_000);
      expect((await rows()).filter((r) => r.workflow_uuid !== 'orw-crash')).toEqual(
        ['orw-0', 'orw-1'].map((id) => ({ workflow_uuid: id, status: 'SUCCESS', application_version: 'v2', executor_id: 'exec-v2' })),
      );
      // The interrupted one: cancelled, its claim open.
      expect((await rows()).find((r) => r.workflow_uuid === 'orw-crash')).toMatchObject({ status: 'CANCELLED' });
      const ledger = async () =>
        (
          await tdb.sql.query(
            `SELECT workflow_id, reason, application_version, rewound_at IS NOT NULL AS done FROM afterlife.rewinds ORDER BY 1`,
          )
        ).rows;
      expect(await ledger()).toEqual([
        { workflow_id: 'orw-0', reason: 'orphaned-version', application_version: 'v2', done: true },
        { workflow_id: 'orw-1', reason: 'orphaned-version', application_version: 'v2', done: true },
        { workflow_id: 'orw-crash', reason: 'orphaned-version', application_version: 'v2', done: false },
      ]);
      // A fresh claim may be a live reaper's: the next pass leaves it.
      await reap();
      expect((await rows()).find((r) => r.workflow_uuid === 'orw-crash')).toMatchObject({ status: 'CANCELLED' });
      // Stale (backdated): the pass takes it over and rewinds it.
      await tdb.sql.query(`UPDATE afterlife.rewinds SET claimed_at = now() - interval '1 hour' WHERE workflow_id = 'orw-crash'`);
      await reap();
      await waitAllSuccess(tdb.sql, ['orw-crash'], 60_000);
      expect((await rows()).find((r) => r.workflow_uuid === 'orw-crash')).toMatchObject({
        status: 'SUCCESS',
        application_version: 'v2',
        executor_id: 'exec-v2',
      });
      expect((await ledger()).every((r) => r.done)).toBe(true);
      expect((await tdb.sql.query(`SELECT 1 FROM dbos.workflow_status WHERE forked_from IS NOT NULL`)).rowCount).toBe(0);
    },
  );
});
