import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { registerAlive } from '../../../packages/executor/src/db/queries/executors.js';
import { deathNotice, type DeathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { writeHeartbeat } from '../../../packages/executor/src/contract/heartbeat.js';
import { pendingIds } from '../../helpers/agents.js';
import { pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { waitForLock } from '../../helpers/detection.js';
import { type PlaneRoles, planeRoles } from '../../helpers/planeRoles.js';
import { reaperFixture } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Issue 30: a beat is evidence of life only while fresh. A `manual` notice about an executor SIGKILLed 2 s
 * earlier (its lock free, its last beat still in Redis for its TTL but stale) moves its work at once, with no
 * reaper running; a notice about a live executor still moves nothing; one refused only on a fresh beat is
 * nacked (redelivered), not dropped, and goes through once the beat is stale. executorDeath runs as its role
 * of infra/grants.sql; the executors are real DBOS processes with the kit.
 */
describe('executorDeath: a genuine notice about a dead executor', () => {
  const fx = reaperFixture('app-genuine');
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
  const envelope = (n: DeathNotice) => JSON.parse(pubsubCloudEvent(JSON.stringify(n)).body) as unknown;
  const manual = (executorId: string) =>
    envelope(deathNotice({ executorId, applicationName: fx.app, reason: 'manual', detectedBy: 'operator' }));
  const death = () => {
    if (!rt) throw new Error('no runtime');
    return rt;
  };

  it(
    'a manual notice 2 s after a SIGKILL moves the work within 5 s; one about the live heir moves nothing',
    { timeout: 120_000 },
    async () => {
      const heir = await fx.executor('heir', { beat: true });
      const victim = await fx.executor('victim', { beat: true });
      await Promise.all([waitForLock(fx.tdb.sql, fx.app, 'heir'), waitForLock(fx.tdb.sql, fx.app, 'victim')]);
      const ids = ['g-1', 'g-2'];
      for (const id of ids) await victim.start(id, { steps: 2, stepMs: 4_000 });
      await waitFor('both PENDING on the victim', async () => (await pendingIds(fx.tdb.sql, 'victim')).length === 2);

      // Forged: the heir holds its lock and beats. Refused, acked; nothing of it moves.
      await heir.start('h-1', { steps: 1, stepMs: 3_000 });
      await waitFor('h-1 PENDING on the heir', async () => (await pendingIds(fx.tdb.sql, 'heir')).includes('h-1'));
      expect(await handleDeathEvent(death(), manual('heir'))).toMatchObject({ ack: true, kind: 'refused' });
      expect(await pendingIds(fx.tdb.sql, 'heir')).toContain('h-1');

      victim.kill('SIGKILL');
      await victim.exited;
      const killedAt = Date.now();
      await new Promise((r) => setTimeout(r, 2_000 - (Date.now() - killedAt)));
      // Its last beat is still in Redis (TTL 3 s here, 15 s by default), two seconds old.
      expect(await death().redis?.exists(`afterlife:${fx.app}:hb:victim`)).toBe(1);
      const sentAt = Date.now();
      const out = await handleDeathEvent(death(), manual('victim'));
      expect(out).toMatchObject({ ack: true, kind: 'recovered', summary: { reenqueued: 2 } });
      await waitFor(
        'the heir runs both',
        async () =>
          (await workflowRows(fx.tdb.sql, ids)).every((r) => r.executor_id === 'heir' && ['PENDING', 'SUCCESS'].includes(r.status)),
        { timeoutMs: 5_000 },
      );
      console.log(
        `[genuine notice] sent ${sentAt - killedAt} ms after the SIGKILL; work claimed by the heir ${Date.now() - sentAt} ms after it`,
      );
      expect(await handleDeathEvent(death(), manual('heir'))).toMatchObject({ ack: true, kind: 'refused' });
      await waitFor('h-1 done where it ran', async () => (await workflowRows(fx.tdb.sql, ['h-1']))[0]?.status === 'SUCCESS', {
        timeoutMs: 20_000,
      });
      expect((await workflowRows(fx.tdb.sql, ['h-1']))[0]?.executor_id).toBe('heir');
    },
  );

  it('a notice refused only on a fresh beat is nacked for redelivery, and goes through once the beat is stale', async () => {
    const id = 'beating';
    await registerAlive(fx.rt.db, {
      applicationName: fx.app,
      executorId: id,
      applicationVersion: 'v1',
      startedAt: new Date(),
      heartbeats: true,
      liveness: true,
      incarnation: 'inc-beating',
    });
    await fx.tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, created_at, updated_at)
       VALUES ('b-1', 'PENDING', 'agentWorkflow', $1, 'v1', $2, $3, $3)`,
      [id, fx.app, Date.now()],
    );
    // Its lock is free (no kit session holds it); a beat as a kit writes it, fresh, then 2 s old.
    const beatAged = async (ageMs: number) => {
      const at = new Date(Date.now() - ageMs).toISOString();
      const value = {
        executorId: id,
        applicationName: fx.app,
        applicationVersion: 'v1',
        state: 'alive' as const,
        startedAt: at,
        beatAt: at,
        inFlight: 1,
        beatEveryMs: 250,
        ttlMs: 15_000,
      };
      await writeHeartbeat(death().redis!, value, 15_000 - ageMs);
    };
    await beatAged(0);
    const before = death().logger.lines.length;
    expect(await handleDeathEvent(death(), manual(id))).toMatchObject({ ack: false, kind: 'retry', code: 'heartbeat_alive' });
    const line = death()
      .logger.lines.slice(before)
      .find((l) => l.event === 'death_notice_refused');
    expect(line).toMatchObject({ redeliver: true });
    expect(await pendingIds(fx.tdb.sql, id)).toEqual(['b-1']);
    await beatAged(2_000);
    expect(await handleDeathEvent(death(), manual(id))).toMatchObject({ ack: true, kind: 'recovered', summary: { reenqueued: 1 } });
  });
});
