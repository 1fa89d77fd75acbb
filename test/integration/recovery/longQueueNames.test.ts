import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { registerAlive } from '../../../packages/executor/src/db/queries/executors.js';
import { REQUEUED_PAYLOAD_MAX_BYTES, RequeuedNotice, requeuedChannel } from '../../../packages/executor/src/contract/requeued.js';
import { pendingIds } from '../../helpers/agents.js';
import { pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { waitFor } from '../../helpers/db.js';
import { type PlaneRoles, planeRoles } from '../../helpers/planeRoles.js';
import { reaperFixture } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * The claim-now hint a recovery sends (contract/requeued.ts) can never fail the move: 20 queues with
 * 424-character names (over 8,000 bytes of names, Postgres's NOTIFY bound), in ASCII and in a 3-byte
 * character, and the dead executor's 21 rows move on the first recovery, run as executorDeath's role of
 * infra/grants.sql. The survivor still hears a hint within the bound, naming the queues that fit and
 * counting the rest.
 */
describe('recovery: long queue names', () => {
  const fx = reaperFixture('app-longq');
  let roles: PlaneRoles | undefined;
  let rt: ReturnType<typeof testRuntime> | undefined;
  let listener: pg.Client | undefined;
  const heard: string[] = [];
  beforeAll(async () => {
    roles = await planeRoles(fx.tdb.url, fx.tdb.sql);
    rt = testRuntime({ databaseUrl: roles.url('executor_death'), applicationName: fx.app });
    listener = new pg.Client({ connectionString: fx.tdb.url });
    await listener.connect();
    listener.on('notification', (n) => {
      if (n.payload) heard.push(n.payload);
    });
    await listener.query(`LISTEN ${pg.escapeIdentifier(requeuedChannel('afterlife'))}`);
    await registerAlive(fx.rt.db, {
      applicationName: fx.app,
      executorId: 'survivor',
      applicationVersion: 'v1',
      startedAt: new Date(),
      heartbeats: false,
      liveness: true,
      incarnation: 'inc-survivor',
    });
    await fx.tdb.sql.query(
      `UPDATE afterlife.executors SET kit_facts = '{"pollsOnRequest": true}' WHERE application_name = $1 AND executor_id = 'survivor'`,
      [fx.app],
    );
  });
  const death = () => {
    if (!rt) throw new Error('no runtime');
    return rt;
  };
  afterAll(async () => {
    await listener?.end();
    await rt?.close();
    await roles?.drop();
  });

  for (const [label, char] of [
    ['ASCII', 'q'],
    ['multibyte', '€'],
  ] as const) {
    it(`20 queues of 424-character names (${label}): the dead executor's 21 rows move on the first recovery`, async () => {
      const dead = `dead-${label}`;
      await registerAlive(fx.rt.db, {
        applicationName: fx.app,
        executorId: dead,
        applicationVersion: 'v1',
        startedAt: new Date(),
        heartbeats: false,
        liveness: true,
        incarnation: `inc-${dead}`,
      });
      const queues = Array.from({ length: 20 }, (_, i) => `${String(i).padStart(2, '0')}${char.repeat(422)}`);
      expect(queues.every((q) => q.length === 424)).toBe(true);
      const now = Date.now();
      for (let i = 0; i < 21; i++) {
        await fx.tdb.sql.query(
          `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, queue_name, created_at, updated_at)
           VALUES ($1, 'PENDING', 'agentWorkflow', $2, 'v1', $3, $4, $5, $5)`,
          [`${dead}-${i}`, dead, fx.app, queues[i % 20], now - 60_000 + i],
        );
      }
      heard.length = 0;
      const notice = deathNotice({ executorId: dead, applicationName: fx.app, reason: 'manual', detectedBy: 'operator' });
      const out = await handleDeathEvent(death(), JSON.parse(pubsubCloudEvent(JSON.stringify(notice)).body) as unknown);
      expect(out).toMatchObject({ ack: true, kind: 'recovered', summary: { reenqueued: 21 } });
      expect(await pendingIds(fx.tdb.sql, dead)).toEqual([]);
      const hint = await waitFor('the survivor is asked', async () => heard.at(-1));
      expect(Buffer.byteLength(hint, 'utf8')).toBeLessThanOrEqual(REQUEUED_PAYLOAD_MAX_BYTES);
      const parsed = RequeuedNotice.parse(JSON.parse(hint));
      expect(parsed.to).toEqual(['survivor']);
      expect(parsed.queues.length).toBeGreaterThan(0);
      expect(parsed.queues.length + (parsed.more ?? 0)).toBe(20);
      expect(parsed.queues).toEqual(queues.slice(0, parsed.queues.length));
      expect(death().logger.lines.filter((l) => l.severity === 'ERROR' || l.event === 'requeued_hint_failed')).toEqual([]);
    });
  }
});
