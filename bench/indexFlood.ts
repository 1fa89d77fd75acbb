/**
 * Question (issue 23, observation 4): what do 200k far-future members in an app's heartbeat index (anyone
 * with the Redis URL can ZADD them) cost a recovery and `GET /drain`? Both read every heartbeat of the app
 * through the index. The audit measured every recovery at 2.6 s (51 ms clean) and `GET /drain` at 0.73 s
 * (16 ms clean) before the index was bounded.
 *
 * On the shared Redis, under a unique app name (its keys are deleted afterwards), and a fresh database:
 * 3 live executors beat once; a dead one owns 3 PENDING rows per recovery. For each of `--reps` rounds:
 * clean — a recovery, a drain progress read; then the index is flooded with `--members` members scored in
 * the year 2255 and the same two are timed twice (the first read after a flood, the next one). Medians and
 * worst runs are printed. With the bound, the first read after a flood prunes it; without it (the code
 * before issue 23), every read pays for it.
 *
 *   npm run build && node dist/bench/indexFlood.js [--members 200000] [--reps 3]
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { deathNotice } from '../packages/executor/src/contract/deathNotice.js';
import { drainProgress } from '../shared/drain/index.js';
import { heartbeatIndexKey, writeHeartbeat } from '../packages/executor/src/contract/heartbeat.js';
import { createRedis, waitReady } from '../packages/executor/src/lock/redis.js';
import { silentLogger } from '../packages/executor/src/log.js';
import { recoverExecutor } from '../shared/recovery/recoverExecutor.js';
import { afterlifeDb, createDbosDatabase, dropDatabase, median } from './lib.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string) => (args.includes(name) ? (args[args.indexOf(name) + 1] ?? dflt) : dflt);
const MEMBERS = Number(opt('--members', '200000'));
const REPS = Number(opt('--reps', '3'));
const APP = `bench-flood-${randomBytes(3).toString('hex')}`;
const DB = `bench_flood_${randomBytes(3).toString('hex')}`;

const url = await createDbosDatabase(DB);
const pool = new pg.Pool({ connectionString: url, max: 4 });
const db = afterlifeDb(pool, 4);
const redis = createRedis(process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379', { commandTimeoutMs: 60_000 });
await waitReady(redis, 5_000);
const logger = silentLogger();

async function beatLive(): Promise<void> {
  const now = new Date().toISOString();
  for (let i = 0; i < 3; i++) {
    await writeHeartbeat(
      redis,
      {
        executorId: `live-${i}`,
        applicationName: APP,
        applicationVersion: 'v1',
        state: 'alive',
        startedAt: now,
        beatAt: now,
        inFlight: 0,
        beatEveryMs: 250,
        ttlMs: 600_000,
      },
      600_000,
    );
  }
}

async function flood(): Promise<void> {
  for (let i = 0; i < MEMBERS; i += 10_000) {
    const zargs: Array<string | number> = [];
    for (let j = i; j < Math.min(MEMBERS, i + 10_000); j++) zargs.push(9e12, `forged-${j}`);
    await redis.zadd(heartbeatIndexKey(APP), ...zargs);
  }
}

let round = 0;
async function recovery(): Promise<number> {
  const id = `dead-${round++}`;
  await pool.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name)
     SELECT $1 || '-' || g, 'PENDING', 'w', $1, 'v1', $2 FROM generate_series(1, 3) g`,
    [id, APP],
  );
  const t = performance.now();
  await recoverExecutor(
    { db, redis, lock: undefined, logger, batchSize: 1_000, lockTtlMs: 30_000, clock: Date.now },
    deathNotice({ executorId: id, applicationName: APP, reason: 'manual', detectedBy: 'bench' }),
  );
  return performance.now() - t;
}

async function drainRead(): Promise<number> {
  const t = performance.now();
  await drainProgress({ db, redis, logger, applicationName: APP, defaultBudgetMs: 60_000 }, { applicationVersion: 'v1' });
  return performance.now() - t;
}

const r: Record<string, number[]> = {
  'recovery clean': [],
  'recovery flooded (1st)': [],
  'recovery flooded (2nd)': [],
  'drain clean': [],
  'drain flooded (1st)': [],
  'drain flooded (2nd)': [],
};
try {
  await beatLive();
  for (let i = 0; i < REPS; i++) {
    await redis.del(heartbeatIndexKey(APP));
    await beatLive();
    r['recovery clean']!.push(await recovery());
    r['drain clean']!.push(await drainRead());
    await flood();
    r['recovery flooded (1st)']!.push(await recovery());
    r['recovery flooded (2nd)']!.push(await recovery());
    await flood();
    r['drain flooded (1st)']!.push(await drainRead());
    r['drain flooded (2nd)']!.push(await drainRead());
  }
  console.log(`index flood: ${MEMBERS} far-future members, ${REPS} rounds (median / worst, ms)`);
  for (const [k, xs] of Object.entries(r))
    console.log(
      `  ${k.padEnd(24)} ${median(xs).toFixed(1).padStart(8)} / ${Math.max(...xs)
        .toFixed(1)
        .padStart(8)}`,
    );
} finally {
  const keys = await redis.keys(`afterlife:${APP}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
  await pool.end();
  await dropDatabase(DB);
}
