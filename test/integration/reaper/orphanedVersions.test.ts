import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { runReaper, type ReaperSummary } from '../../../shared/reaper/index.js';
import { beat, makeOrphans, orphanThroughRecovery, waitAllSuccess } from '../../helpers/agents.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { kitEnv } from '../../helpers/kit.js';
import { testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * The reaper's orphaned-versions pass (docs/design.md#invariant-2-recovery-re-enqueues-it-never-executes). A real v1 executor is SIGKILLed mid-step;
 * its rows are recovered (re-enqueued) while only a v2 executor (with the kit) is alive, so they sit
 * ENQUEUED on v1, which nothing will ever claim. Once untouched for ORPHANED_VERSION_GRACE_MS (backdated,
 * not slept) the pass reports them under `leave`, never touches a version with a live heartbeat, is skipped
 * when Redis cannot say which versions live, and under `fork-to-latest` forks them onto v2 where they finish.
 */
type Completed = Extract<ReaperSummary, { outcome: 'completed' }>;
const IDS = ['orph-0', 'orph-1', 'orph-2'];
const GRACE_MS = 300_000; // the default

describe('reaper: orphaned versions', () => {
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;
  const runtimes: Array<ReturnType<typeof testRuntime>> = [];
  const executors: ExecutorHandle[] = [];
  const app = uniqueName('app-orphver');

  const rows = async () =>
    (await tdb.sql.query(`SELECT * FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) ORDER BY workflow_uuid`, [IDS])).rows;
  const reap = async (r: ReturnType<typeof testRuntime>, o: { dryRun?: boolean } = {}): Promise<Completed> => {
    const s = await runReaper(testReaperDeps(r), { maxTicks: 1, ...o });
    if (s.outcome !== 'completed') throw new Error(`reaper skipped: ${s.reason}`);
    return s;
  };
  const runtime = (env: Record<string, string> = {}, o: { redisUrl?: string; redis?: 'none' } = {}) => {
    const r = testRuntime({ databaseUrl: tdb.url, applicationName: app, env, ...o });
    runtimes.push(r);
    return r;
  };

  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = runtime();
    // v1 launches first, so v2 (launched next) is the latest version.
    await makeOrphans({
      databaseUrl: tdb.url,
      sql: tdb.sql,
      applicationName: app,
      executorId: 'exec-v1',
      applicationVersion: 'v1',
      ids: IDS,
      stepMs: 1_500,
    });
    await waitFor('the SIGKILLed executor has no sessions left', async () => {
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
    expect(summary.reenqueued).toBe(IDS.length);
    expect(summary.versionsWithoutExecutor).toEqual(['v1']);
  }, 120_000);
  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop()));
    for (const r of runtimes) await r.close();
    await tdb?.drop();
  });

  it('leave: reports the rows once older than the grace, and changes nothing', async () => {
    const fresh = await reap(rt);
    expect(fresh.passes.orphaned).toMatchObject({ runs: 1, errors: 0, found: 0 });
    expect((await rows()).map((r) => [r.status, r.application_version])).toEqual(IDS.map(() => ['ENQUEUED', 'v1']));

    // Untouched for longer than the grace (database clock, as DBOS writes updated_at).
    await tdb.sql.query(`UPDATE dbos.workflow_status SET updated_at = updated_at - $2::bigint WHERE workflow_uuid = ANY($1)`, [
      IDS,
      GRACE_MS + 60_000,
    ]);
    const before = await rows();

    const dry = await reap(rt, { dryRun: true });
    expect(dry.planned?.filter((p) => p.pass === 'orphaned')).toEqual(
      IDS.map((id) => ({
        pass: 'orphaned',
        action: 'report',
        workflowId: id,
        executorId: 'exec-v1',
        detail: { applicationVersion: 'v1' },
      })),
    );

    const s = await reap(rt);
    expect(s.passes.orphaned).toMatchObject({ runs: 1, errors: 0, found: 3, reported: 3, forked: 0 });
    expect([...s.orphanedWorkflows].sort()).toEqual(IDS);
    expect(s.orphanedSkipped).toEqual([]);
    const warned = rt.logger.lines.filter((l) => l.event === 'orphaned_version' && l.pass === 'orphaned');
    expect(warned.at(-1)).toMatchObject({ severity: 'WARNING', applicationVersion: 'v1', count: 3, policy: 'leave' });
    expect(await rows()).toEqual(before);
    expect((await tdb.sql.query(`SELECT count(*)::int AS n FROM afterlife.forks`)).rows[0]).toEqual({ n: 0 });
  });

  it('a version with a live executor (heartbeat alive) is never touched, even under fork-to-latest', async () => {
    const before = await rows();
    const fork = runtime({ ORPHANED_VERSION_POLICY: 'fork-to-latest', REPAIR_MODE: 'fork' });
    await beat(rt.redis!, app, 'exec-ghost', 'v1', 60_000, 'alive');
    try {
      const s = await reap(fork);
      expect(s.passes.orphaned).toMatchObject({ runs: 1, found: 0, forked: 0 });
      expect(await rows()).toEqual(before);
      // A draining executor claims nothing new: its version counts as orphaned (reported under leave).
      await beat(rt.redis!, app, 'exec-ghost', 'v1', 60_000, 'draining');
      expect((await reap(rt)).passes.orphaned).toMatchObject({ found: 3 });
    } finally {
      await rt.redis?.del(heartbeatKey(app, 'exec-ghost'));
    }
    expect(await rows()).toEqual(before);
  });

  it('Redis unreachable or not configured: the pass is skipped, saying why, and nothing is forked', async () => {
    const before = await rows();
    const down = await reap(runtime({ ORPHANED_VERSION_POLICY: 'fork-to-latest' }, { redisUrl: 'redis://127.0.0.1:1' }));
    expect(down.orphanedSkipped).toHaveLength(1);
    expect(down.orphanedSkipped[0]).toMatch(/^redis unreachable/);
    expect(down.passes.orphaned).toMatchObject({ runs: 0, errors: 0 });
    const none = await reap(runtime({ ORPHANED_VERSION_POLICY: 'fork-to-latest' }, { redis: 'none' }));
    expect(none.orphanedSkipped).toEqual(['REDIS_URL is not set']);
    expect(await rows()).toEqual(before);
  });

  it(
    'fork-to-latest: forks them onto v2, cancels the originals, and the forks finish on the live v2 executor',
    { timeout: 90_000 },
    async () => {
      const fork = runtime({ ORPHANED_VERSION_POLICY: 'fork-to-latest', REPAIR_MODE: 'fork' });
      const s = await reap(fork);
      expect(s.passes.orphaned).toMatchObject({ runs: 1, errors: 0, found: 3, forked: 3, failed: 0, notForked: 0 });
      expect((await rows()).map((r) => r.status)).toEqual(IDS.map(() => 'CANCELLED'));
      const forks = IDS.map((id) => `${id}-fork-1`);
      await waitAllSuccess(tdb.sql, forks, 60_000);
      const forked = await tdb.sql.query(
        `SELECT workflow_uuid, forked_from, application_version, executor_id, status FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) ORDER BY 1`,
        [forks],
      );
      expect(forked.rows).toEqual(
        IDS.map((id) => ({
          workflow_uuid: `${id}-fork-1`,
          forked_from: id,
          application_version: 'v2',
          executor_id: 'exec-v2',
          status: 'SUCCESS',
        })),
      );
      const ledger = await tdb.sql.query(
        `SELECT source_workflow_id, reason, original_cancelled_at IS NOT NULL AS cancelled FROM afterlife.forks ORDER BY 1`,
      );
      expect(ledger.rows).toEqual(IDS.map((id) => ({ source_workflow_id: id, reason: 'orphaned-version', cancelled: true })));

      // Nothing left to find: the originals are cancelled, the forks ran.
      const again = await reap(fork);
      expect(again.passes.orphaned).toMatchObject({ found: 0 });
    },
  );

  it('cancels the original of a fork-to-latest fork interrupted before its cancel, whatever the policy', async () => {
    // A fork was made and recorded, then the process died before cancelling the original (still ENQUEUED).
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, application_version, application_name, queue_name)
       VALUES ('interrupted-1', 'ENQUEUED', 'agentWorkflow', 'v1', $1, '_dbos_internal_queue')`,
      [app],
    );
    await tdb.sql.query(
      `INSERT INTO afterlife.forks (root_workflow_id, n, application_name, source_workflow_id, from_step, new_workflow_id, application_version, reason, forked_by)
       VALUES ('interrupted-1', 1, $1, 'interrupted-1', 0, 'interrupted-1-fork-1', 'v2', 'orphaned-version', 'test')`,
      [app],
    );
    const s = await reap(runtime({ ORPHANED_VERSION_POLICY: 'leave' }));
    expect(s.outcome).toBe('completed');
    const row = await tdb.sql.query(`SELECT status FROM dbos.workflow_status WHERE workflow_uuid = 'interrupted-1'`);
    expect(row.rows).toEqual([{ status: 'CANCELLED' }]);
    const ledger = await tdb.sql.query(
      `SELECT original_cancelled_at IS NOT NULL AS done FROM afterlife.forks WHERE new_workflow_id = 'interrupted-1-fork-1'`,
    );
    expect(ledger.rows).toEqual([{ done: true }]);
  });
});
