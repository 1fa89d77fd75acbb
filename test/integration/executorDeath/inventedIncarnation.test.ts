import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { registerAlive } from '../../../packages/executor/src/db/queries/executors.js';
import { pendingIds } from '../../helpers/agents.js';
import { pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { type PlaneRoles, planeRoles } from '../../helpers/planeRoles.js';
import { reaperFixture } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Whoever can publish a death notice cannot grow the recovery audit by inventing incarnations: 300 notices
 * about one dead executor, each naming a made-up incarnation, write no `recoveries` row (the first, genuine
 * notice wrote one), each acknowledged with its reason logged. executorDeath runs as its role of
 * infra/grants.sql.
 */
describe('executorDeath: notices naming incarnations the registry never knew', () => {
  const fx = reaperFixture('app-invented');
  let roles: PlaneRoles | undefined;
  let rt: ReturnType<typeof testRuntime> | undefined;
  beforeAll(async () => {
    roles = await planeRoles(fx.tdb.url, fx.tdb.sql);
    rt = testRuntime({ databaseUrl: roles.url('executor_death'), applicationName: fx.app, poolMax: 8 });
  });
  afterAll(async () => {
    await rt?.close();
    await roles?.drop();
  });
  const death = () => {
    if (!rt) throw new Error('no runtime');
    return rt;
  };
  const send = (incarnation: string | undefined) => {
    const n = deathNotice({
      executorId: 'gone',
      applicationName: fx.app,
      reason: 'manual',
      detectedBy: 'operator',
      ...(incarnation ? { incarnation } : {}),
    });
    return handleDeathEvent(death(), JSON.parse(pubsubCloudEvent(JSON.stringify(n)).body) as unknown);
  };
  const audit = async () =>
    (
      await fx.tdb.sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM afterlife.recoveries WHERE application_name = $1 AND executor_id = 'gone'`,
        [fx.app],
      )
    ).rows[0]?.n ?? 0;

  it('300 notices with made-up incarnations about one dead executor write no audit row', { timeout: 120_000 }, async () => {
    await registerAlive(fx.rt.db, {
      applicationName: fx.app,
      executorId: 'gone',
      applicationVersion: 'v1',
      startedAt: new Date(Date.now() - 60_000),
      heartbeats: false,
      liveness: true,
      incarnation: 'inc-real',
    });
    await fx.tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, created_at, updated_at)
       VALUES ('inv-1', 'PENDING', 'agentWorkflow', 'gone', 'v1', $1, $2, $2)`,
      [fx.app, Date.now() - 30_000],
    );
    const first = await send('inc-real');
    expect(first, JSON.stringify(first)).toMatchObject({ ack: true, kind: 'recovered', summary: { reenqueued: 1 } });
    expect(await pendingIds(fx.tdb.sql, 'gone')).toEqual([]);
    expect(await audit()).toBe(1);

    const before = death().logger.lines.length;
    // One at a time: concurrent notices about one executor contend for its recovery lock and are redelivered.
    for (let i = 0; i < 300; i++) {
      const out = await send(`made-up-${i}`);
      expect(out, JSON.stringify(out)).toMatchObject({ ack: true, summary: { outcome: 'nothing-to-do' } });
    }
    expect(await audit()).toBe(1);
    const said = death()
      .logger.lines.slice(before)
      .filter((l) => l.event === 'recovery_duplicate' && l.why === 'unknown_incarnation');
    expect(said).toHaveLength(300);
    // The genuine incarnation repeated is still the duplicate it was; no row either.
    expect(await send('inc-real')).toMatchObject({ ack: true, summary: { outcome: 'nothing-to-do' } });
    expect(await audit()).toBe(1);
  });

  it('an invented incarnation with rows to move is still a recovery: the rows move', async () => {
    await fx.tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, created_at, updated_at)
       VALUES ('inv-2', 'PENDING', 'agentWorkflow', 'gone', 'v1', $1, $2, $2)`,
      [fx.app, Date.now() - 30_000],
    );
    expect(await send('made-up-with-work')).toMatchObject({ ack: true, summary: { reenqueued: 1 } });
    expect(await pendingIds(fx.tdb.sql, 'gone')).toEqual([]);
  });
});
