import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyOptInIndexes, listOptInIndexes } from '../../../shared/db/optIn.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { silentLogger } from '../../../packages/executor/src/log.js';
import { recoverExecutor } from '../../../shared/recovery/recoverExecutor.js';
import { afterlifeDb, createTestDatabase, type TestDatabase } from '../../helpers/db.js';

/**
 * The opt-in owner index replaces the earlier one (keyed by owner only, so a batch walking created_at order
 * read and sorted every remaining row of the executor): applying it drops its predecessor only once it is
 * built; with it, batches that walk it (equality on the version, IS NULL for none) move exactly their rows.
 * Which plan a batch gets is the planner's choice; bench/recovery.ts (which builds this index) measures what it costs.
 */
describe('opt-in owner index', () => {
  let t: TestDatabase;
  const app = 'app-optin';
  const indexes = async () =>
    (
      await t.sql.query<{ name: string; valid: boolean; def: string }>(
        `SELECT c.relname AS name, i.indisvalid AS valid, pg_get_indexdef(c.oid) AS def
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'dbos' AND c.relname LIKE 'afterlife_%' ORDER BY 1`,
      )
    ).rows;

  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('replaces the owner-only index once the new one is built, and is idempotent', async () => {
    // The definition an operator may have built from an earlier release.
    await t.sql.query(
      `CREATE INDEX afterlife_workflow_status_pending_owner ON dbos.workflow_status (executor_id, application_version)
         INCLUDE (application_name, started_at_epoch_ms, updated_at, created_at) WHERE status = 'PENDING'`,
    );
    expect(await listOptInIndexes()).toEqual(['afterlife_workflow_status_pending_owner_created']);
    const db = afterlifeDb(t.url, { max: 1 });
    try {
      await applyOptInIndexes(db);
      await applyOptInIndexes(db);
    } finally {
      await db.end();
    }
    const after = await indexes();
    expect(after.map((i) => i.name)).toEqual(['afterlife_workflow_status_pending_owner_created']);
    expect(after[0]?.valid).toBe(true);
    expect(after[0]?.def).toContain('(executor_id, application_version, created_at, workflow_uuid)');
  });

  it(
    "with it, recoveries move exactly their executor's rows in batches, a NULL-version executor included",
    { timeout: 60_000 },
    async () => {
      await t.sql.query(
        `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
          application_name, queue_name, recovery_attempts, created_at, updated_at, serialization)
       SELECT 'wf-' || g, 'PENDING', 'agentWorkflow', '', '', 'exec-' || (g % 3), CASE WHEN g % 3 = 1 THEN NULL ELSE 'v1' END,
              $1, 'agents', 1, 1700000000000 + g / 2, 1700000000000 + g, 'js_superjson'
         FROM generate_series(1, 6000) g`,
        [app],
      );
      await t.sql.query('VACUUM ANALYZE dbos.workflow_status');
      const db = afterlifeDb(t.url, { max: 1 });
      try {
        for (const executorId of ['exec-0', 'exec-1']) {
          const out = await recoverExecutor(
            { db, redis: undefined, lock: undefined, logger: silentLogger(), batchSize: 500, lockTtlMs: 5_000, clock: Date.now },
            deathNotice({ executorId, applicationName: app, reason: 'manual', detectedBy: 'test' }),
          );
          expect(out).toMatchObject({ outcome: 'completed', reenqueued: 2000 });
        }
      } finally {
        await db.end();
      }
      const left = await t.sql.query<{ executor_id: string; status: string; n: string }>(
        `SELECT executor_id, status, count(*) AS n FROM dbos.workflow_status GROUP BY 1, 2 ORDER BY 1, 2`,
      );
      expect(left.rows.map((r) => `${r.executor_id}:${r.status}:${r.n}`)).toEqual([
        'exec-0:ENQUEUED:2000',
        'exec-1:ENQUEUED:2000',
        'exec-2:PENDING:2000',
      ]);
      const moved = await t.sql.query<{ n: string; d: string }>(
        `SELECT count(*) AS n, count(DISTINCT id) AS d FROM afterlife.recovery_batches, unnest(workflow_ids) AS id`,
      );
      expect(moved.rows[0]).toEqual({ n: '4000', d: '4000' });
    },
  );
});
