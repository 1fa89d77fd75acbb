import { afterAll, beforeAll } from 'vitest';
import { reaperDeps } from '../../shared/reaper/deps.js';
import { sentinelKey } from '../../shared/reaper/evidence.js';
import type { ReaperDeps } from '../../shared/reaper/types.js';
import type { Runtime } from '../../shared/runtime.js';
import type { Faults } from '../../packages/executor/src/testing/faults.js';
import { heartbeatKey } from '../../packages/executor/src/contract/heartbeat.js';
import { createRedis } from '../../packages/executor/src/lock/redis.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from './db.js';
import { type ExecutorHandle, startExecutor } from './executor.js';
import { kitEnv } from './kit.js';
import { testRuntime } from './runtime.js';
import { TEST_REDIS_URL } from './services.js';

/** Reaper dependencies over a test Runtime, named so the audit shows the test as the detector. */
export function testReaperDeps(rt: Runtime, overrides: Partial<ReaperDeps> = {}): ReaperDeps {
  return { ...reaperDeps(rt), detectedBy: 'reaper-test', ...overrides };
}

/** Env for a fast reaper: tick 1 s, heartbeat TTL 3 s (acceptance A's numbers). */
export const FAST_REAPER_ENV = {
  HEARTBEAT_TTL_MS: '3000',
  REAPER_TICK_MS: '1000',
  BUDGET_MARGIN_MS: '1000',
};
export const TEST_TTL_MS = 3_000;

export interface ReaperFixture {
  readonly app: string;
  readonly tdb: TestDatabase;
  readonly rt: ReturnType<typeof testRuntime>;
  readonly executors: ExecutorHandle[];
  /**
   * Starts a real DBOS executor (version v1) of the fixture's app; with `beat`, with the executor kit
   * attached (heartbeat TTL 3 s, registry, no publishing), otherwise bare (no kit, like `local`). Call them
   * one at a time: the example app's CREATE TABLE IF NOT EXISTS races when two launch at once.
   */
  executor(executorId: string, o?: { beat?: boolean; env?: Record<string, string> }): Promise<ExecutorHandle>;
}

/**
 * One test database, a Runtime with the fast reaper env, and every executor and heartbeat started
 * through it stopped afterwards. Registers its own beforeAll/afterAll; call it in a describe body.
 */
export function reaperFixture(
  prefix: string,
  o: { env?: Record<string, string>; faults?: Faults; redisUrl?: () => string } = {},
): ReaperFixture {
  const app = uniqueName(prefix);
  const executors: ExecutorHandle[] = [];
  let tdb: TestDatabase | undefined;
  let rt: ReturnType<typeof testRuntime> | undefined;
  const redisUrl = () => o.redisUrl?.() ?? TEST_REDIS_URL;
  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = testRuntime({
      databaseUrl: tdb.url,
      applicationName: app,
      redisUrl: redisUrl(),
      env: { ...FAST_REAPER_ENV, ...o.env },
      ...(o.faults ? { faults: o.faults } : {}),
    });
  });
  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop()));
    await rt?.close();
    await tdb?.drop();
  });
  const need = <T>(v: T | undefined, what: string): T => {
    if (v === undefined) throw new Error(`${what} is not ready (used outside a test?)`);
    return v;
  };
  return {
    app,
    get tdb() {
      return need(tdb, 'test database');
    },
    get rt() {
      return need(rt, 'runtime');
    },
    executors,
    async executor(executorId, opts = {}) {
      const env = opts.beat
        ? kitEnv({ ttlMs: TEST_TTL_MS, env: { REDIS_URL: redisUrl(), ...opts.env } })
        : { AFTERLIFE_KIT: 'off', ...opts.env };
      const e = await startExecutor({
        databaseUrl: need(tdb, 'test database').url,
        applicationName: app,
        applicationVersion: 'v1',
        executorId,
        env,
      });
      executors.push(e);
      if (opts.beat) {
        const key = heartbeatKey(app, executorId);
        const probe = createRedis(redisUrl());
        try {
          await waitFor(`the kit of ${executorId} beats`, async () => (await probe.exists(key)) === 1);
        } finally {
          probe.disconnect();
        }
      }
      return e;
    },
  };
}

/**
 * Makes the reaper read Redis as having kept its keys for `agoMs`: a missing heartbeat key is evidence of
 * silence only once Redis has kept its keys for a TTL (shared/reaper/deathRule.ts), so tests that backdate an
 * absence backdate this too, instead of waiting a TTL after the first tick. How long Redis kept its keys is
 * Postgres's record of Redis's identity (afterlife.redis_witness, issue 30), not the sentinel's value: the
 * sentinel is made to exist (its absence means a flush) and the record backdated once a tick has made it.
 */
export async function backdateSentinel(rt: Runtime, agoMs = 3_600_000): Promise<void> {
  const prefix = rt.config.redis?.keyPrefix ?? 'afterlife';
  await rt.redis?.set(sentinelKey(rt.config.applicationName, prefix), new Date(Date.now() - agoMs).toISOString());
  await rt.db.query(
    `UPDATE ${rt.db.afterlifeSchema}.redis_witness SET keys_since = now() - make_interval(secs => $2::double precision / 1000)
      WHERE application_name = $1`,
    [rt.config.applicationName, agoMs],
  );
}
