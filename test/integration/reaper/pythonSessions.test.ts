import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runReaper } from '../../../shared/reaper/index.js';
import { createTestDatabase, type TestDatabase, uniqueName, workflowRows } from '../../helpers/db.js';
import { type PlaneRoles, planeRoles } from '../../helpers/planeRoles.js';
import { testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * DBOS for Python (2.3.0–2.30.0) names every system-database session plain `dbos_transact`, with no
 * executor ID: while one is open, "executor X has no session" proves nothing, so executors without the kit
 * are unknown — never declared, however long their PENDING rows have been quiet — and the reaper says so
 * (`sessions_unattributed`, naming the fix). An empty name is the same. Sessions the app names per executor
 * (`dbos_transact_<id>_<version>`) are judged as TypeScript's: the executor with one is alive, and an
 * executor with none is declared once nothing unattributed is open. The reaper runs as the reaper's role of
 * infra/grants.sql (with pg_read_all_stats).
 *
 * The sessions here are plain pg clients opened under those names: a stand-in for the SDK, assuming the name
 * DBOS for Python 2.30.0 gives its sessions (`_dbos_config.py`, `default_engine_kwargs`). The real SDK's
 * sessions are judged the same way in test/integration/python/noKit.test.ts.
 */
describe('reaper: sessions as DBOS for Python names them', () => {
  const app = uniqueName('app-pysess');
  let tdb: TestDatabase;
  let roles: PlaneRoles | undefined;
  let rt: ReturnType<typeof testRuntime> | undefined;
  const rows: Record<'py-a' | 'py-named' | 'exec-gone', string[]> = {
    'py-a': ['py-1', 'py-2'],
    'py-named': ['named-1'],
    'exec-gone': ['gone-1'],
  };

  async function session(name: string): Promise<pg.Client> {
    const c = new pg.Client({ connectionString: tdb.url, application_name: name });
    await c.connect();
    return c;
  }

  async function ticks(n: number): Promise<{ declared: string[]; sessions: string[]; unknown: number[] }> {
    if (!rt) throw new Error('no runtime');
    const out = { declared: [] as string[], sessions: [] as string[], unknown: [] as number[] };
    for (let i = 0; i < n; i++) {
      const s = await runReaper(testReaperDeps(rt), { maxTicks: 1 });
      if (s.outcome !== 'completed') throw new Error(`reaper skipped: ${s.reason}`);
      out.sessions.push(String(s.sessions));
      out.unknown.push(s.passes.dead.unknown ?? -1);
      out.declared.push(...s.declaredDead);
    }
    return out;
  }

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
  });
  afterAll(async () => {
    await rt?.close();
    await tdb?.drop();
    await roles?.drop();
  });

  it.each(['dbos_transact', ''])(
    'while a session named %j is open, no executor without the kit is declared, and the reaper names the fix',
    async (name) => {
      if (!rt) throw new Error('no runtime');
      const python = await session(name);
      const named = await session('dbos_transact_py-named_v1');
      try {
        rt.logger.lines.length = 0;
        const t = await ticks(3);
        expect(t.declared).toEqual([]);
        expect(t.sessions).toEqual(['unknown', 'unknown', 'unknown']);
        // py-a and exec-gone are unknown; py-named has its own session and is alive.
        expect(t.unknown).toEqual([2, 2, 2]);
        const warned = rt.logger.lines.filter((l) => l.event === 'sessions_unattributed');
        expect(warned.length).toBeGreaterThanOrEqual(1);
        expect(String(warned[0]?.fix)).toMatch(/attach_executor\(\)/);
        expect(String(warned[0]?.fix)).toMatch(/dbos_transact_\{executor_id\}_\{application_version\}/);
        const still = await workflowRows(tdb.sql, Object.values(rows).flat());
        expect(still.every((r) => r.status === 'PENDING')).toBe(true);
      } finally {
        await python.end();
        await named.end();
      }
    },
  );

  it('sessions named per executor are judged: the named executor is alive, one with no session is declared, a quiet one too', async () => {
    const named = await session('dbos_transact_py-named_v1');
    try {
      // No unattributed session now: py-a (its sessions were the plain-named ones, now closed) and exec-gone have none.
      const t = await ticks(3);
      expect(t.sessions).toEqual(['visible', 'visible', 'visible']);
      expect([...new Set(t.declared)].sort()).toEqual(['exec-gone', 'py-a']);
      expect((await workflowRows(tdb.sql, rows['py-named']))[0]?.status).toBe('PENDING');
      expect((await workflowRows(tdb.sql, [...rows['py-a'], ...rows['exec-gone']])).map((r) => r.status)).toEqual([
        'ENQUEUED',
        'ENQUEUED',
        'ENQUEUED',
      ]);
    } finally {
      await named.end();
    }
  });
});
