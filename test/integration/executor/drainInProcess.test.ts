import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heartbeatKey, HeartbeatValue, readHeartbeat } from '../../../shared/heartbeat/index.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { kitEnv, statuses } from '../../helpers/kit.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * Acceptance C and F, plus the kit's guards: work shorter than the budget finishes in the draining
 * process (no step twice, no recovery); the heartbeat exists with its TTL while alive, says draining
 * during a drain, is deleted by a clean exit and expires within the TTL after SIGKILL; the shared `local`
 * executor ID is refused; an unreachable Redis is logged, never fatal.
 */
const TTL_MS = 3_000;

describe('executor kit: in-process drain and heartbeat', () => {
  let tdb: TestDatabase;
  let redis: Redis;
  const executors: ExecutorHandle[] = [];
  const app = uniqueName('app-hb');
  const start = (executorId: string, env: Record<string, string> = {}) =>
    startExecutor({ databaseUrl: tdb.url, applicationName: app, applicationVersion: 'v1', executorId, env: kitEnv({ ttlMs: TTL_MS, env }) }).then((e) => {
      executors.push(e);
      return e;
    });
  const read = async (executorId: string) => readHeartbeat(redis, heartbeatKey(app, executorId));

  beforeAll(async () => {
    tdb = await createTestDatabase();
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop()));
    redis?.disconnect();
    await tdb?.drop();
  });

  it('C + F: short steps all finish in the draining process; heartbeat alive → draining → deleted', async () => {
    const e = await start('exec-c');
    const ids = Array.from({ length: 5 }, (_, i) => `c-${i}`);
    for (const id of ids) await e.start(id, { steps: 3, stepMs: 1_000 });

    // F: alive, with its TTL and the in-flight count.
    const alive = await waitFor('heartbeat with 5 in flight', async () => {
      const hb = await read('exec-c');
      return hb?.value?.inFlight === 5 ? hb : undefined;
    });
    expect(HeartbeatValue.parse(alive.value)).toMatchObject({ executorId: 'exec-c', applicationName: app, applicationVersion: 'v1', state: 'alive' });
    expect(alive.ttlMs).toBeGreaterThan(0);
    expect(alive.ttlMs).toBeLessThanOrEqual(TTL_MS);

    const wall0 = Date.now();
    e.kill('SIGTERM');
    const draining = await waitFor('heartbeat says draining', async () => {
      const hb = await read('exec-c');
      return hb?.value?.state === 'draining' ? hb : undefined;
    });
    expect(draining.ttlMs).toBeGreaterThan(0);
    const exit = await e.exited;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(Date.now() - wall0).toBeLessThan(10_000);
    expect(await read('exec-c')).toBeUndefined();

    // C: everything finished here, each step ran exactly once, nothing needed recovering.
    expect(await statuses(tdb.sql, ids)).toEqual({ SUCCESS: 5 });
    const owners = await tdb.sql.query<{ executor_id: string }>(`SELECT DISTINCT executor_id FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`, [ids]);
    expect(owners.rows).toEqual([{ executor_id: 'exec-c' }]);
    const runs = await tdb.sql.query<{ workflow_id: string; step: number; starts: number; executors: number }>(
      `SELECT workflow_id, step, count(*)::int AS starts, count(DISTINCT executor_id)::int AS executors
         FROM public.step_runs WHERE phase = 'start' AND workflow_id = ANY($1) GROUP BY 1, 2`,
      [ids],
    );
    expect(runs.rows).toHaveLength(15);
    expect(runs.rows.every((r) => r.starts === 1 && r.executors === 1)).toBe(true);
    const out = e.output.join('');
    expect(out).toContain('nothing left PENDING');
    expect(out).not.toContain('death_notice_published');
    expect((await tdb.sql.query(`SELECT 1 FROM afterlife.recoveries`)).rowCount).toBe(0);
    const reg = await tdb.sql.query(`SELECT state, reason FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'exec-c'`, [app]);
    expect(reg.rows).toEqual([{ state: 'dead', reason: 'sigterm' }]);
  });

  it('F: after SIGKILL the heartbeat expires within its TTL', async () => {
    const e = await start('exec-f');
    await waitFor('heartbeat', async () => (await read('exec-f'))?.value?.state === 'alive');
    e.kill('SIGKILL');
    await e.exited;
    const killedAt = Date.now();
    const hb = await read('exec-f');
    expect(hb?.ttlMs).toBeLessThanOrEqual(TTL_MS);
    await waitFor('heartbeat expired', async () => (await read('exec-f')) === undefined, { timeoutMs: TTL_MS + 1_000, intervalMs: 50 });
    expect(Date.now() - killedAt).toBeLessThanOrEqual(TTL_MS + 100);
  });

  it('refuses DBOS’s shared default executor ID `local`', async () => {
    await expect(start('local')).rejects.toThrow(/shared default/);
  });

  it('an unreachable Redis is logged, never fatal: the app runs and still drains on SIGTERM', async () => {
    const e = await start('exec-noredis', { REDIS_URL: 'redis://127.0.0.1:1' });
    await e.start('nr-0', { steps: 2, stepMs: 300 });
    await waitFor('heartbeat failure logged', async () => e.output.join('').includes('heartbeat_failed'));
    e.kill('SIGTERM');
    expect(await e.exited).toEqual({ code: 0, signal: null });
    expect(await statuses(tdb.sql, ['nr-0'])).toEqual({ SUCCESS: 1 });
  });
});
