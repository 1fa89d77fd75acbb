/**
 * Question: does a busy Redis (a Memorystore the app also uses, millions of unrelated keys) slow a
 * recovery down? Recovery reads every heartbeat of the app (the live versions); it used to SCAN the
 * keyspace for them, and now reads the per-app heartbeat index (packages/executor/src/contract/heartbeat.ts).
 *
 * Two private redis-servers on free ports (the shared one is never filled or flushed): one holds only the
 * app's heartbeats (20 live executors), the other the same heartbeats plus `--keys` unrelated keys
 * (DEBUG POPULATE). Recoveries of dead executors (100 PENDING rows each, reason `heartbeat-lapsed`, so the
 * heartbeat is re-read before every batch as in production) alternate between the two, `--reps` each;
 * the figure is the median duration of `recoverExecutor` per Redis, and their difference. For context it
 * also times the heartbeat read alone: through the index, and the SCAN fallback (an app whose kits never
 * wrote the index).
 *
 *   npm run build && node dist/bench/heartbeats.js [--keys 1000000] [--reps 15]
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import pg from 'pg';
import { deathNotice } from '../packages/executor/src/contract/deathNotice.js';
import { readAllHeartbeats, writeHeartbeat } from '../packages/executor/src/contract/heartbeat.js';
import { RedisLock } from '../shared/lock/lock.js';
import { createRedis, waitReady } from '../packages/executor/src/lock/redis.js';
import { silentLogger } from '../packages/executor/src/log.js';
import { recoverExecutor } from '../shared/recovery/recoverExecutor.js';
import { afterlifeDb, createDbosDatabase, dropDatabase, median, ms } from './lib.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string) => (args.includes(name) ? (args[args.indexOf(name) + 1] ?? dflt) : dflt);
const KEYS = Number(opt('--keys', '1000000'));
const REPS = Number(opt('--reps', '15'));
const APP = 'bench-hb';
const LIVE = 20;
const PER = 100;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

async function privateRedis(): Promise<{ url: string; proc: ChildProcess }> {
  const port = await freePort();
  const proc = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--enable-debug-command', 'local'],
    {
      stdio: 'ignore',
    },
  );
  const url = `redis://127.0.0.1:${port}`;
  const probe = createRedis(url);
  const deadline = Date.now() + 10_000;
  while (!(await waitReady(probe, 200))) if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not start`);
  probe.disconnect();
  return { url, proc };
}

const servers = [await privateRedis(), await privateRedis()];
const [quiet, busy] = servers.map((s) => createRedis(s.url, { commandTimeoutMs: 30_000 }));
if (!quiet || !busy) throw new Error('no redis');
await Promise.all([waitReady(quiet, 5_000), waitReady(busy, 5_000)]);
let t = process.hrtime.bigint();
await busy.call('DEBUG', 'POPULATE', String(KEYS), 'unrelated');
console.error(`populated ${KEYS} unrelated keys in ${(ms(t) / 1000).toFixed(1)} s (dbsize ${await busy.dbsize()})`);
const now = new Date().toISOString();
for (const r of [quiet, busy]) {
  for (let i = 0; i < LIVE; i++) {
    await writeHeartbeat(
      r,
      { executorId: `live-${i}`, applicationName: APP, applicationVersion: 'v1', state: 'alive', startedAt: now, beatAt: now, inFlight: 0 },
      3_600_000,
    );
    // The same executors for an app without the index: what the SCAN fallback costs.
    await r.set(`afterlife:${APP}-old:hb:live-${i}`, '{}', 'PX', 3_600_000);
  }
}

const dbName = `afterlife_bench_hb_${process.pid}`;
const url = await createDbosDatabase(dbName);
const pool = new pg.Pool({ connectionString: url, max: 3 });
await pool.query(
  `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
      application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, serialization)
   SELECT 'wf-' || e || '-' || g, 'PENDING', 'agentWorkflow', '', '', 'dead-' || e, 'v1', $3, NULL, 1, md5(g::text),
          1700000000000 + g * $1 + e, 1700000000000 + g * $1 + e, 'js_superjson'
     FROM generate_series(1, $1) e, generate_series(1, $2) g`,
  [2 * REPS, PER, APP],
);
await pool.query('VACUUM ANALYZE dbos.workflow_status');
const db = afterlifeDb(pool, 3);
await pool.query('SELECT 1');

const took = { quiet: [] as number[], busy: [] as number[] };
const reads = { index: { quiet: [] as number[], busy: [] as number[] }, scan: { quiet: [] as number[], busy: [] as number[] } };
let n = 0;
for (let rep = 0; rep < REPS; rep++) {
  for (const which of rep % 2 ? (['busy', 'quiet'] as const) : (['quiet', 'busy'] as const)) {
    const redis = which === 'quiet' ? quiet : busy;
    n += 1;
    t = process.hrtime.bigint();
    const out = await recoverExecutor(
      {
        db,
        redis,
        lock: new RedisLock(redis),
        logger: silentLogger(),
        batchSize: 1000,
        lockTtlMs: 30_000,
        clock: Date.now,
        recoveredBy: 'bench',
      },
      deathNotice({ executorId: `dead-${n}`, applicationName: APP, reason: 'heartbeat-lapsed', detectedBy: 'bench' }),
    );
    took[which].push(ms(t));
    if (out.outcome !== 'completed' || out.reenqueued !== PER || out.versionsWithoutExecutor.length)
      throw new Error(`unexpected recovery: ${JSON.stringify(out)}`);
    t = process.hrtime.bigint();
    const seen = await readAllHeartbeats(redis, APP);
    reads.index[which].push(ms(t));
    t = process.hrtime.bigint();
    const scanned = await readAllHeartbeats(redis, `${APP}-old`);
    reads.scan[which].push(ms(t));
    if (seen.size !== LIVE || scanned.size !== LIVE) throw new Error(`heartbeats: index ${seen.size}, scan ${scanned.size}`);
  }
}
await pool.end();
await dropDatabase(dbName);
quiet.disconnect();
busy.disconnect();
for (const s of servers) s.proc.kill('SIGKILL');

const f = (xs: number[]) => `${median(xs).toFixed(2)} ms (max ${Math.max(...xs).toFixed(1)})`;
console.log(`| Redis | recoverExecutor, ${PER} rows (median of ${REPS}) | heartbeat read through the index | SCAN fallback |`);
console.log('|---|---|---|---|');
console.log(`| ${LIVE} heartbeats only | ${f(took.quiet)} | ${f(reads.index.quiet)} | ${f(reads.scan.quiet)} |`);
console.log(`| + ${KEYS.toLocaleString('en')} unrelated keys | ${f(took.busy)} | ${f(reads.index.busy)} | ${f(reads.scan.busy)} |`);
console.log(`difference of the recovery medians: ${(median(took.busy) - median(took.quiet)).toFixed(2)} ms`);
process.exit(0);
