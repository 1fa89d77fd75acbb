import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { registerAlive } from '../../../packages/executor/src/db/queries/executors.js';
import { cancelTimedOut } from '../../../shared/dbos/retention/timeout.js';
import { pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { type PlaneRoles, planeRoles } from '../../helpers/planeRoles.js';
import { reaperFixture } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Statuses afterlife does not act on: DBOS's `SUSPENDED` (Java 1.4, TypeScript 5.5, Python 3.5) and one no
 * release writes yet. A dead executor owning such rows, alongside a PENDING one and another application's
 * PENDING row under the same executor ID: the recovery (executorDeath, as its role of infra/grants.sql)
 * moves this application's PENDING row only, leaves the rest exactly as they were, and says which statuses
 * it left alone and why (recovery_left_alone). The global timeout passes them over too.
 */
describe('recovery: statuses afterlife does not act on, and other applications’ rows', () => {
  const fx = reaperFixture('app-statuses');
  let roles: PlaneRoles | undefined;
  let rt: ReturnType<typeof testRuntime> | undefined;
  beforeAll(async () => {
    roles = await planeRoles(fx.tdb.url, fx.tdb.sql);
    rt = testRuntime({ databaseUrl: roles.url('executor_death'), applicationName: fx.app });
  });
  afterAll(async () => {
    await rt?.close();
    await roles?.drop();
  });
  const death = () => {
    if (!rt) throw new Error('no runtime');
    return rt;
  };
  const snapshot = async () =>
    (
      await fx.tdb.sql.query<{
        workflow_uuid: string;
        status: string | null;
        executor_id: string;
        updated_at: string;
        queue_name: string | null;
      }>(
        `SELECT workflow_uuid, status, executor_id, updated_at::text, queue_name FROM dbos.workflow_status WHERE executor_id = 'dead-owner' ORDER BY 1`,
      )
    ).rows;

  it('a dead executor’s SUSPENDED and unknown-status rows are left alone and reported; another app’s row is not moved', async () => {
    await registerAlive(fx.rt.db, {
      applicationName: fx.app,
      executorId: 'dead-owner',
      applicationVersion: 'v1',
      startedAt: new Date(Date.now() - 120_000),
      heartbeats: false,
      liveness: true,
      incarnation: 'inc-owner',
    });
    const old = Date.now() - 3_600_000;
    const rows: [string, string | null, string][] = [
      ['s-pending', 'PENDING', fx.app],
      ['s-suspended', 'SUSPENDED', fx.app],
      ['s-unknown', 'PAUSED_BY_SOMETHING_NEW', fx.app],
      ['s-null', null, fx.app],
      ['s-other-app', 'PENDING', `${fx.app}-other`],
    ];
    for (const [id, status, app] of rows)
      await fx.tdb.sql.query(
        `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, queue_name, created_at, updated_at)
         VALUES ($1, $2, 'agentWorkflow', 'dead-owner', 'v1', $3, 'q', $4, $4)`,
        [id, status, app, old],
      );
    const before = await snapshot();
    const n = deathNotice({ executorId: 'dead-owner', applicationName: fx.app, reason: 'manual', detectedBy: 'operator' });
    const out = await handleDeathEvent(death(), JSON.parse(pubsubCloudEvent(JSON.stringify(n)).body) as unknown);
    expect(out).toMatchObject({ ack: true, kind: 'recovered', summary: { reenqueued: 1 } });
    const after = await snapshot();
    const changed = after.filter((a) => JSON.stringify(a) !== JSON.stringify(before.find((b) => b.workflow_uuid === a.workflow_uuid)));
    expect(changed.map((c) => [c.workflow_uuid, c.status])).toEqual([['s-pending', 'ENQUEUED']]);

    const report = death().logger.lines.find((l) => l.event === 'recovery_left_alone');
    expect(report).toMatchObject({
      severity: 'WARNING',
      statuses: { SUSPENDED: 1, PAUSED_BY_SOMETHING_NEW: 1, NULL: 1 },
    });
    expect(JSON.stringify(report?.why)).toMatch(/SUSPENDED":"a suspended wait/);
    expect(JSON.stringify(report?.why)).toMatch(/PAUSED_BY_SOMETHING_NEW":"a status this afterlife does not know/);

    // The global timeout (as the reaper's role would run it) cancels none of them either.
    const cancelled = await cancelTimedOut(fx.rt.db, fx.app, 60_000, 100);
    expect(cancelled.map((c) => c.workflowId).sort()).toEqual(['s-pending']);
    const final = await snapshot();
    expect(final.filter((r) => r.workflow_uuid !== 's-pending')).toEqual(before.filter((r) => r.workflow_uuid !== 's-pending'));
  });
});
