import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { readTimeline } from '../../../shared/db/queries/readTimeline.js';
import { recoverExecutor } from '../../../shared/recovery/recoverExecutor.js';
import { timelineView } from '../../../shared/timeline/view.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * A workflow parked in `DBOS.sleep` when its executor died: DBOS wrote the sleep's step row on the dead
 * executor (started before the death), and its completion — the wake-up — lands after the move. That step is
 * the dead executor's, not a start elsewhere: the first step elsewhere is the first step that *started* after
 * the move, and no figure of the timeline is negative (a sleep counted as a start put the first step 1.3–1.5 s
 * before the kill). DBOS's own records are written here around a real recovery, as DBOS for TypeScript 5.x
 * writes them (../shared/docs/dbos-system-database.md, operation_outputs: `DBOS.sleep` writes its row upfront
 * with `completed_at_epoch_ms` = the wake-up deadline); the outside report of the same fault came from DBOS's
 * own starter app.
 */
describe('timeline: a workflow parked in DBOS.sleep at the death', () => {
  const app = uniqueName('app-sleep');
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = testRuntime({ databaseUrl: tdb.url, applicationName: app, redis: 'none' });
  });
  afterAll(async () => {
    await rt?.close();
    await tdb?.drop();
  });

  it('the first step elsewhere is the first to start after the move; every figure is ≥ 0', async () => {
    const t0 = Date.now() - 5_000;
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name,
                                         created_at, updated_at, started_at_epoch_ms)
       VALUES ('sleeper', 'PENDING', 'agentWorkflow', 'gone', 'v1', $1, $2, $2, $2)`,
      [app, t0],
    );
    // Step 0 done before the death; step 1 is the sleep, begun on the dead executor 1.5 s before the notice
    // and written, as DBOS writes it, with its wake-up (after the move) as its completion.
    await tdb.sql.query(
      `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, output, started_at_epoch_ms, completed_at_epoch_ms)
       VALUES ('sleeper', 0, 'tool', '1', $1::bigint, $1::bigint + 100), ('sleeper', 1, 'DBOS.sleep', NULL, $2::bigint, $3::bigint)`,
      [t0, Date.now() - 1_500, Date.now() + 1_000],
    );
    const notice = deathNotice({ executorId: 'gone', applicationName: app, reason: 'manual', detectedBy: 'test' });
    const summary = await recoverExecutor(
      {
        db: rt.db,
        redis: undefined,
        lock: undefined,
        logger: rt.logger,
        recoveredBy: 'test',
        batchSize: 100,
        lockTtlMs: 5_000,
        clock: Date.now,
      },
      notice,
    );
    expect(summary.outcome).toBe('completed');
    // The new owner replays the recorded sleep, wakes, and starts the next step.
    const movedAt = Date.now();
    await tdb.sql.query(
      `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, output, started_at_epoch_ms, completed_at_epoch_ms)
       VALUES ('sleeper', 2, 'tool', '2', $1::bigint, $1::bigint + 50)`,
      [movedAt + 300],
    );
    const row = await readTimeline(rt.db, app, { executorId: 'gone' });
    if (!row) throw new Error('no timeline');
    const t = timelineView(row);
    expect(Date.parse(t.firstStepElsewhereAt ?? '')).toBe(movedAt + 300);
    for (const v of [t.deathToDeclaredMs, t.deathToReenqueuedMs, t.deathToFirstStepMs, t.deathToAllStartedMs])
      if (v !== null) expect(v).toBeGreaterThanOrEqual(0);
    expect(t.lastSignOfLifeSource).toBe('declaration');
  });
});
