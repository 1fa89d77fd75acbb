import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heartbeatKey, HeartbeatValue, readHeartbeat } from '../../../packages/executor/src/contract/heartbeat.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { AGENT_SERVE_LATE, FUNCTIONS_FRAMEWORK_MAIN, kitEnv, statuses } from '../../helpers/kit.js';
import { freePort, TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * The kit's in-process drain and its guards: work shorter than the budget finishes in the draining
 * process (no step twice, no recovery); the heartbeat exists with its TTL while alive, says draining
 * during a drain — for the whole drain, even one longer than the TTL — is deleted by a clean exit and
 * expires within the TTL after SIGKILL; the shared `local` executor ID is refused; an unreachable Redis is
 * logged, never fatal.
 */
const TTL_MS = 3_000;

interface Sighting {
  at: number;
  state: string;
  ttlMs: number | undefined;
}

describe('executor kit: in-process drain and heartbeat', () => {
  let tdb: TestDatabase;
  let redis: Redis;
  const executors: ExecutorHandle[] = [];
  const app = uniqueName('app-hb');
  const start = (executorId: string, env: Record<string, string> = {}, script?: string) =>
    startExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      applicationVersion: 'v1',
      executorId,
      env: kitEnv({ ttlMs: TTL_MS, env }),
      ...(script ? { script } : {}),
    }).then((e) => {
      executors.push(e);
      return e;
    });
  const read = async (executorId: string) => readHeartbeat(redis, heartbeatKey(app, executorId));

  /**
   * SIGTERM, then the heartbeat read every 100 ms until the process exits, and once right after. Asserts
   * the clean-exit shape: alive (until the signal lands) → draining with no gap → absent and never back,
   * the last sighting just before the exit, and the key gone sooner than its remaining TTL could run out —
   * so it was deleted, not expired.
   */
  async function sigtermAndWatch(e: ExecutorHandle): Promise<{ t0: number; exitAt: number; lastSeen: Sighting }> {
    const t0 = Date.now();
    e.kill('SIGTERM');
    let exitedAt: number | undefined;
    void e.exited.then(() => (exitedAt = Date.now()));
    const seen: Sighting[] = [];
    while (exitedAt === undefined) {
      if (Date.now() - t0 > 12_000) throw new Error(`no exit 12 s after SIGTERM:\n${e.output.join('')}`);
      const hb = await read(e.executorId);
      seen.push({ at: Date.now(), state: hb ? (hb.value?.state ?? 'unreadable') : 'absent', ttlMs: hb?.ttlMs });
      await new Promise((r) => setTimeout(r, 100));
    }
    const exitAt = exitedAt;
    expect(await e.exited, e.output.join('')).toEqual({ code: 0, signal: null });
    expect(await read(e.executorId)).toBeUndefined();
    const states = seen.map((x) => x.state).join(' ');
    expect(states).toMatch(/^(alive )*draining( draining)*( absent)*$/);
    const lastSeen = seen.filter((x) => x.state !== 'absent').at(-1);
    if (!lastSeen) throw new Error('heartbeat never seen during the drain');
    expect(exitAt - lastSeen.at).toBeLessThan(3_000);
    // Read right after the exit (or the first absent read before it): sooner than the TTL it had left.
    const goneAt = seen.find((x) => x.state === 'absent')?.at ?? exitAt;
    expect(goneAt - lastSeen.at).toBeLessThan(lastSeen.ttlMs ?? 0);
    return { t0, exitAt, lastSeen };
  }

  beforeAll(async () => {
    tdb = await createTestDatabase();
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop()));
    redis?.disconnect();
    await tdb?.drop();
  });

  it('short steps all finish in the draining process; heartbeat alive → draining → deleted', async () => {
    const e = await start('exec-c');
    const ids = Array.from({ length: 5 }, (_, i) => `c-${i}`);
    for (const id of ids) await e.start(id, { steps: 3, stepMs: 1_000 });

    // F: alive, with its TTL and the in-flight count.
    const alive = await waitFor('heartbeat with 5 in flight', async () => {
      const hb = await read('exec-c');
      return hb?.value?.inFlight === 5 ? hb : undefined;
    });
    expect(HeartbeatValue.parse(alive.value)).toMatchObject({
      executorId: 'exec-c',
      applicationName: app,
      applicationVersion: 'v1',
      state: 'alive',
    });
    expect(alive.ttlMs).toBeGreaterThan(0);
    expect(alive.ttlMs).toBeLessThanOrEqual(TTL_MS);

    // Draining throughout, then deleted at the end (not left to expire).
    const { t0, exitAt, lastSeen } = await sigtermAndWatch(e);
    expect(lastSeen.ttlMs).toBeGreaterThan(0);
    expect(exitAt - t0).toBeLessThan(10_000);

    // C: everything finished here, each step ran exactly once, nothing needed recovering.
    expect(await statuses(tdb.sql, ids)).toEqual({ SUCCESS: 5 });
    const owners = await tdb.sql.query<{ executor_id: string }>(
      `SELECT DISTINCT executor_id FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`,
      [ids],
    );
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
    const reg = await tdb.sql.query(
      `SELECT state, reason FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'exec-c'`,
      [app],
    );
    expect(reg.rows).toEqual([{ state: 'dead', reason: 'sigterm' }]);
  });

  it('a SIGTERM drain longer than the TTL keeps the heartbeat (draining) to the end, then deletes it', async () => {
    // Steps of 5 s outlast both the 3 s TTL and the 6.5 s in-flight wait: a key that lapsed mid-drain would
    // let the reaper declare this working executor dead and run its steps a second time elsewhere.
    const e = await start('exec-long');
    await e.start('long-0', { steps: 2, stepMs: 5_000 });
    await waitFor('long-0 running with the kit beating', async () => (await read('exec-long'))?.value?.inFlight === 1);
    const { t0, exitAt, lastSeen } = await sigtermAndWatch(e);
    // The drain really outlasted the TTL: only beats during it kept the key until just before the exit.
    expect(lastSeen.at - t0).toBeGreaterThan(TTL_MS + 1_000);
    console.log(
      `[long drain] SIGTERM → exit ${exitAt - t0} ms; heartbeat (draining) last seen ${lastSeen.at - t0} ms after SIGTERM with ${lastSeen.ttlMs} ms TTL left`,
    );
  });

  it('after SIGKILL the heartbeat expires within its TTL', async () => {
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

  it('a kit attached after functions-framework began listening still runs first on SIGTERM and drains', async () => {
    // The framework registers its SIGTERM listener (a synchronous process.exit()) once listening; this app
    // attaches the kit on its first request, later. An appended listener would never run.
    const port = await freePort();
    const e = await start(
      'exec-late',
      { AFTERLIFE_KIT: 'off', FUNCTION_TARGET: 'agentLate', FUNCTION_SOURCE: AGENT_SERVE_LATE, PORT: String(port) },
      FUNCTIONS_FRAMEWORK_MAIN,
    );
    const url = `http://127.0.0.1:${port}/`;
    const attached = await waitFor('kit attached by the first request', async () => {
      const res = await fetch(url).catch(() => undefined);
      return res?.status === 200 ? ((await res.json()) as unknown) : undefined;
    });
    expect(attached).toEqual({ executorId: 'exec-late', state: 'alive' });
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ workflowId: 'late-0', spec: { steps: 3, stepMs: 1_000 } }),
    });
    expect(res.status).toBe(202);
    await waitFor('late-0 in flight', async () => (await read('exec-late'))?.value?.inFlight === 1);
    await sigtermAndWatch(e);
    expect(e.output.join('')).toContain('executor_exit');
    expect(await statuses(tdb.sql, ['late-0'])).toEqual({ SUCCESS: 1 });
  });

  it('a death notice that fails validation is logged and the shutdown still completes (exit 0)', async () => {
    // A 500-character executor ID is accepted by DBOS, but `detectedBy` ("afterlife-executor:" + ID) is then
    // over the notice's 512-character limit. The bridge URL is never contacted: validation fails first.
    const id = `exec-${'v'.repeat(495)}`;
    const e = await start(id, { AFTERLIFE_PUBLISH: 'pubsub', PUBSUB_BRIDGE_URL: 'http://127.0.0.1:1/' });
    await e.start('bad-notice-0', { steps: 2, stepMs: 5_000 });
    await waitFor('bad-notice-0 in flight', async () => (await read(id))?.value?.inFlight === 1);
    e.kill('SIGTERM');
    await waitFor('the kit is draining', async () => /executor_draining/.test(e.output.join('')), { timeoutMs: 5_000, intervalMs: 20 });
    e.kill('SIGTERM'); // the fast path: straight to the hand-over
    expect(await e.exited, e.output.join('')).toEqual({ code: 0, signal: null });
    const out = e.output.join('');
    expect(out).toContain('death notice not published');
    expect(out).toContain('executor_exit');
    expect(await read(id)).toBeUndefined();
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
