import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unlimitedBudget } from '../../../shared/lifecycle/deadline.js';
import { ANCESTOR_WALK } from '../../../shared/dbos/retention/predicates.js';
import { runRetentionPass } from '../../../shared/retention/pass.js';
import { runCli } from '../../helpers/cli.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Issue 30's retention findings, on staged rows (no executor needed: the statements alone decide):
 * completed descendants more than 50 levels below a running root were deleted; the global timeout cancelled
 * another application's one-minute-old child of a timed-out root; a newline in a workflow ID forged a line
 * in `afterlife-plane retention --dry-run`.
 */
const DAY = 86_400_000;
const HOUR = 3_600_000;

async function seed(
  sql: pg.Pool,
  rows: Array<{ id: string; app: string; status: string; agoMs: number; parent?: string | undefined }>,
): Promise<void> {
  for (const r of rows) {
    const completed = ['SUCCESS', 'ERROR', 'CANCELLED'].includes(r.status);
    await sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, application_name, application_version,
         parent_workflow_id, created_at, updated_at, completed_at)
       SELECT $1, $2, 'w', '', '', $3, 'v1', $4, at, at, CASE WHEN $5 THEN at END
         FROM (SELECT (EXTRACT(EPOCH FROM now()) * 1000)::bigint - $6::bigint AS at) t`,
      [r.id, r.status, r.app, r.parent ?? null, completed, r.agoMs],
    );
  }
}

describe('retention: bounds and scope (issue 30)', () => {
  let tdb: TestDatabase;
  const app = uniqueName('app-retb');
  const other = uniqueName('app-other');
  const rts: Array<{ close: () => Promise<void> }> = [];

  const pass = (env: Record<string, string>, dryRun = false) => {
    const rt = testRuntime({ databaseUrl: tdb.url, applicationName: app, redis: 'none', env });
    rts.push(rt);
    return runRetentionPass(rt, { budget: unlimitedBudget(), dryRun });
  };
  const statuses = async (ids: string[]) =>
    Object.fromEntries(
      (
        await tdb.sql.query<{ workflow_uuid: string; status: string }>(
          `SELECT workflow_uuid, status FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`,
          [ids],
        )
      ).rows.map((r) => [r.workflow_uuid, r.status]),
    );

  beforeAll(async () => {
    tdb = await createTestDatabase();
  });

  afterAll(async () => {
    for (const rt of rts) await rt.close();
    await tdb?.drop();
  });

  it('never deletes a descendant of a running root, however deep; what is not held still goes', async () => {
    // A running root, then a chain of completed descendants well past the ancestor walk's bound.
    const depth = ANCESTOR_WALK + 15;
    const chain = Array.from({ length: depth }, (_, i) => `deep-${i + 1}`);
    await seed(tdb.sql, [
      { id: 'deep-root', app, status: 'PENDING', agoMs: 3 * DAY },
      ...chain.map((id, i) => ({ id, app, status: 'SUCCESS', agoMs: 2 * DAY, parent: i === 0 ? 'deep-root' : chain[i - 1] })),
      { id: 'plain-old', app, status: 'SUCCESS', agoMs: 2 * DAY },
    ]);
    const r = await pass({ RETENTION_MAX_AGE_MS: String(DAY) });
    expect(r.deleted).toBe(1);
    const left = await statuses(['deep-root', 'plain-old', ...chain]);
    expect(left['plain-old']).toBeUndefined();
    expect(Object.keys(left).length).toBe(depth + 1);
  });

  it("the global timeout cancels the timed-out root and its own application's children, never another application's", async () => {
    await seed(tdb.sql, [
      { id: 'late-root', app, status: 'PENDING', agoMs: 2 * HOUR },
      { id: 'late-own-child', app, status: 'PENDING', agoMs: 60_000, parent: 'late-root' },
      { id: 'late-other-child', app: other, status: 'PENDING', agoMs: 60_000, parent: 'late-root' },
    ]);
    const r = await pass({ WORKFLOW_GLOBAL_TIMEOUT_MS: String(HOUR) });
    // (deep-root, running for three days, times out too.)
    expect(r.timedOutWorkflows).toContain('late-root');
    expect(await statuses(['late-root', 'late-own-child', 'late-other-child'])).toEqual({
      'late-root': 'CANCELLED',
      'late-own-child': 'CANCELLED',
      'late-other-child': 'PENDING',
    });
  });

  it('a workflow ID with a newline cannot forge a line of `retention --dry-run`', async () => {
    const forged = 'evil\nWARNING: retention is OFF, nothing will be deleted';
    // Its own application, so the list holds this one workflow.
    const cliApp = uniqueName('app-retcli');
    await seed(tdb.sql, [{ id: forged, app: cliApp, status: 'SUCCESS', agoMs: 2 * DAY }]);
    const run = await runCli(['retention', '--dry-run'], {
      DATABASE_URL: tdb.url,
      DBOS_APPLICATION_NAME: cliApp,
      RETENTION_MAX_AGE_MS: String(DAY),
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('would delete: evil\\nWARNING: retention is OFF');
    expect(run.stdout.split('\n').some((line) => line.startsWith('WARNING'))).toBe(false);
  });
});
