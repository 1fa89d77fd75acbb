/**
 * bench/fleet's simulated executors (issue 31), `FLEET_EXECUTORS` of them per child process (bench/fleet.ts
 * starts one per 100), so their event loop is not the one timing kills. Each of the `--executors` N speaks the kit's real protocol with the kit's own code:
 * its registry row (registerAlive, as the kit's liveness connection registers it), its liveness session
 * with the lease (LivenessLock: one pg.Client each, the fence question once a second) and its heartbeat
 * (Heartbeat: the kit's script every 250 ms with a 15 s TTL). What it leaves out: DBOS itself (no
 * workflows, no DBOS pool) and the kit's drain-request poll (one statement a second on the kit's own small
 * pool; the real executors of the bench run it, and docs/operations.md counts it per executor).
 *
 * Footprint, so a hundred share a process: the liveness session is per executor (it is the evidence);
 * the registry writes share one small pool, and heartbeats share one Redis client per 50 executors (the
 * commands are the kit's; only the sockets are pooled).
 *
 * Each kit starts at a random moment of FLEET_START_WINDOW_MS (a deploy), with nothing but its own retries
 * to space the connects out. Talks to the parent over IPC: `ready` once every executor holds its lock (with
 * each kit's attach time, its start to its lock), `report` on `stop`.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { createDb, type Db } from '../packages/executor/src/db/pool.js';
import { registerAlive } from '../packages/executor/src/db/queries/executors.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TTL_MS, Heartbeat } from '../packages/executor/src/runtime/heartbeat.js';
import { LivenessLock } from '../packages/executor/src/runtime/liveness.js';
import { createRedis } from '../packages/executor/src/lock/redis.js';
import { consoleLogger } from '../packages/executor/src/log.js';

const N = Number(process.env.FLEET_EXECUTORS ?? '0');
const OFFSET = Number(process.env.FLEET_OFFSET ?? '0');
const DATABASE_URL = process.env.DATABASE_URL ?? '';
const REDIS_URL = process.env.REDIS_URL ?? '';
const APP = process.env.DBOS_APPLICATION_NAME ?? '';
const PREFIX = process.env.REDIS_KEY_PREFIX ?? 'afterlife';
const PER_REDIS_CLIENT = 50;
/**
 * Each kit starts at a random moment of this window, on its own, as a deploy or a scale-out starts a fleet:
 * nothing here spaces them out but the kit's own jittered retries. 0 starts them all at once.
 */
const START_WINDOW_MS = Number(process.env.FLEET_START_WINDOW_MS ?? '0');
/** A kit attached: it holds its lock. Past this after its own start, it counts as a slow attach. */
const ATTACH_GOAL_MS = 60_000;

/** Warnings are what an operator would see: to stderr, counted by the parent. */
const log = consoleLogger({ component: 'fleet-sim' }, 'WARNING');

interface Simulated {
  id: string;
  lock: LivenessLock;
  heartbeat: Heartbeat;
  /** When this kit started, and how long it took to hold its lock (undefined: not yet). */
  startedAt?: number;
  attachMs?: number;
}

const fenced: Array<{ executorId: string; verdict: string }> = [];

function simulate(i: number, db: Db, redis: Redis): Simulated {
  const id = `sim-${String(i).padStart(4, '0')}`;
  const incarnation = randomBytes(6).toString('hex');
  const startedAt = new Date();
  const logger = log.child({ executorId: id });
  const lock = new LivenessLock({
    databaseUrl: DATABASE_URL,
    applicationName: APP,
    executorId: id,
    afterlifeSchema: db.afterlifeSchema,
    since: startedAt,
    incarnation,
    logger,
    register: async () => {
      await registerAlive(db, {
        applicationName: APP,
        executorId: id,
        applicationVersion: 'v1',
        startedAt,
        heartbeats: true,
        liveness: true,
        incarnation,
      });
    },
    onFenced: (verdict) => fenced.push({ executorId: id, verdict }),
    // A kit listens for recoveries asking it to claim work now (it has no DBOS to poll): the broadcast's cost is the fleet's.
    onRequeued: () => undefined,
  });
  const heartbeat = new Heartbeat({
    redis,
    ttlMs: DEFAULT_HEARTBEAT_TTL_MS,
    intervalMs: DEFAULT_HEARTBEAT_INTERVAL_MS,
    value: () => ({
      executorId: id,
      applicationName: APP,
      applicationVersion: 'v1',
      state: 'alive',
      startedAt: startedAt.toISOString(),
      beatAt: new Date().toISOString(),
      inFlight: 0,
      beatEveryMs: DEFAULT_HEARTBEAT_INTERVAL_MS,
      ttlMs: DEFAULT_HEARTBEAT_TTL_MS,
    }),
    log: logger,
    prefix: PREFIX,
  });
  return { id, lock, heartbeat };
}

/** As the kit's attach: a first beat and the lock (registering first), then the beat's timer. */
async function startOne(s: Simulated): Promise<void> {
  s.startedAt = Date.now();
  await Promise.all([s.heartbeat.beat(), s.lock.start()]);
  s.heartbeat.start();
}

async function main(): Promise<void> {
  // Registrations only (the kit's own pool of ≤ 2 also polls drain requests once a second: not simulated).
  const poolMax = 2;
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: poolMax, application_name: 'fleet_sim_kit_pool' });
  const db = createDb(pool, poolMax, { dbosSchema: 'dbos', afterlifeSchema: 'afterlife', logger: log, budgetWaitMs: 10_000 });
  const redises = Array.from({ length: Math.max(1, Math.ceil(N / PER_REDIS_CLIENT)) }, () => createRedis(REDIS_URL));
  const sims = Array.from({ length: N }, (_, i) => simulate(OFFSET + i, db, redises[Math.floor(i / PER_REDIS_CLIENT)] as Redis));
  const t0 = Date.now();
  const starts = sims.map(
    (s) =>
      new Promise<void>((resolve, reject) => {
        setTimeout(() => void startOne(s).then(resolve, reject), Math.random() * START_WINDOW_MS);
      }),
  );
  // The lock is retried in the background by the kit; ready means every one of them holds it. Each kit's
  // attach is timed from its own start to the first moment it is seen holding its lock (50 ms grain).
  const deadline = Date.now() + START_WINDOW_MS + 180_000;
  while (Date.now() < deadline) {
    const now = Date.now();
    for (const s of sims) if (s.attachMs === undefined && s.startedAt !== undefined && s.lock.held) s.attachMs = now - s.startedAt;
    if (sims.every((s) => s.attachMs !== undefined)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await Promise.all(starts);
  const attach = sims.map((s) => s.attachMs ?? Infinity).sort((a, b) => a - b);
  process.send?.({
    event: 'ready',
    held: sims.filter((s) => s.lock.held).length,
    startMs: Date.now() - t0,
    attachMs: attach.map((a) => (Number.isFinite(a) ? a : null)),
    slowAttaches: attach.filter((a) => a > ATTACH_GOAL_MS).length,
  });
  process.on('message', (m: { cmd?: string }) => {
    if (m.cmd !== 'stop') return;
    void (async () => {
      const heldAtEnd = sims.filter((s) => s.lock.held).length;
      const heartbeatsLost = sims.reduce((n, s) => n + s.heartbeat.lostCount, 0);
      await Promise.all(sims.map(async (s) => Promise.all([s.heartbeat.stop(1_000), s.lock.close()])));
      redises.forEach((r) => r.disconnect());
      await pool.end();
      process.send?.({ event: 'report', heldAtEnd, heartbeatsLost, fenced });
      process.exit(0);
    })();
  });
}

await main();
