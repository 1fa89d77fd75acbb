import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runReaper } from '../../../shared/reaper/index.js';
import { createTestDatabase, type TestDatabase, uniqueName, workflowRows } from '../../helpers/db.js';
import { type PlaneRoles, planeRoles } from '../../helpers/planeRoles.js';
import { testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Issue 30: DBOS's Python SDK names its system-database sessions `dbos_transact_<executorId>` with no suffix
 * (TypeScript's carry `_<version>`). An executor without the kit whose only sessions are named so is alive,
 * however long its PENDING rows have been quiet; so is one whose ID is a prefix of a live executor's
 * (`exec-1` beside `exec-10`: the doubt resolves to "a session exists"). The reaper runs as the reaper's role
 * of infra/grants.sql (with pg_read_all_stats); an executor with no session at all is the control, declared.
 */
describe('reaper: sessions as DBOS Python names them', () => {
  const app = uniqueName('app-pysess');
  let tdb: TestDatabase;
  let roles: PlaneRoles | undefined;
  let rt: ReturnType<typeof testRuntime> | undefined;
  const sessions: pg.Client[] = [];
  const rows: Record<'py-exec' | 'exec-1' | 'exec-gone', string[]> = {
    'py-exec': ['py-1', 'py-2'],
    'exec-1': ['pre-1'],
    'exec-gone': ['gone-1'],
  };

  beforeAll(async () => {
    tdb = await createTestDatabase();
    roles = await planeRoles(tdb.url, tdb.sql);
    rt = testRuntime({
      databaseUrl: roles.url('reaper'),
      applicationName: app,
      redis: 'none',
      env: { UNKNOWN_EXECUTOR_GRACE_MS: '600000', STUCK_AFTER_MS: '86400000', REAPER_TICK_MS: '250' },
    });
    for (const [executorId, ids] of Object.entries(rows)) {
      for (const id of ids) {
        // Claimed an hour ago, no checkpoint since: quiet well past the 10-minute grace.
        await tdb.sql.query(
          `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name,
                                             created_at, updated_at, started_at_epoch_ms)
           VALUES ($1, 'PENDING', 'agentWorkflow', $2, 'v1', $3, $4, $4, $4)`,
          [id, executorId, app, Date.now() - 3_600_000],
        );
      }
    }
    // DBOS Python's pool for py-exec, and a live exec-10 (exec-1 has no session of its own).
    for (const name of ['dbos_transact_py-exec', 'dbos_transact_exec-10']) {
      const c = new pg.Client({ connectionString: tdb.url, application_name: name });
      await c.connect();
      sessions.push(c);
    }
  });
  afterAll(async () => {
    await Promise.all(sessions.map((c) => c.end().catch(() => undefined)));
    await rt?.close();
    await tdb?.drop();
    await roles?.drop();
  });

  it('never judges a session named dbos_transact_<id> absent, nor an ID that prefixes a live one; an executor with no session is declared', async () => {
    if (!rt) throw new Error('no runtime');
    const declared: string[] = [];
    const seen: string[] = [];
    for (let i = 0; i < 3; i++) {
      const s = await runReaper(testReaperDeps(rt), { maxTicks: 1 });
      if (s.outcome !== 'completed') throw new Error(`reaper skipped: ${s.reason}`);
      seen.push(String(s.sessions));
      declared.push(...s.declaredDead);
    }
    expect(declared).toEqual(['exec-gone']);
    expect(seen).toEqual(['visible', 'visible', 'visible']);
    const still = await workflowRows(tdb.sql, [...rows['py-exec'], ...rows['exec-1']]);
    expect(still.map((r) => [r.workflow_uuid, r.status, r.executor_id])).toEqual([
      ['pre-1', 'PENDING', 'exec-1'],
      ['py-1', 'PENDING', 'py-exec'],
      ['py-2', 'PENDING', 'py-exec'],
    ]);
    expect((await workflowRows(tdb.sql, rows['exec-gone']))[0]?.status).toBe('ENQUEUED');
  });
});
