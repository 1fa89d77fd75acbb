/**
 * bench/reaper — how long one reaper tick takes against a large DBOS system database (acceptance I).
 *
 *   npm run bench:reaper -- [--rows 100000] [--rows 1000000] [--index] [--ticks 30] [--keep]
 *
 * For each size: a fresh database (dropped afterwards), DBOS's schema from DBOS.migrate, afterlife's
 * migrations, then set-based rows (generate_series): 10k PENDING workflows across 100 executors (100 each;
 * one executor is dead, so 100 PENDING rows are orphaned) with checkpoints, and terminal history at a
 * constant rate (~33k workflows a day, 5 % ERROR, some diverged), so a bigger table means a longer history,
 * as in production. Heartbeats for the 99 live executors go to Redis under a unique app name.
 * After VACUUM ANALYZE (what autovacuum would have done), it times ticks with no sleeping, alternating
 * between the databases so the machine's noise lands on every size alike: the first tick of an invocation,
 * later ticks, and the tick that declares the dead executor. `--index` then builds the opt-in index on the
 * same data and measures again (before/after).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig } from '../shared/config/index.js';
import { applyOptInIndexes } from '../shared/db/optIn.js';
import { heartbeatKey } from '../packages/executor/src/contract/heartbeat.js';
import { unlimitedBudget } from '../shared/lifecycle/deadline.js';
import { createRedis } from '../packages/executor/src/lock/redis.js';
import { silentLogger } from '../packages/executor/src/log.js';
import { sentinelKey } from '../shared/reaper/evidence.js';
import { runTick } from '../shared/reaper/tick.js';
import type { ReaperDeps, ReaperState, TickResult } from '../shared/reaper/types.js';
import { noFaults } from '../packages/executor/src/testing/faults.js';
import { afterlifeDb, createDbosDatabase, dropDatabase } from './lib.js';

const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const EXECUTORS = 100;
const PENDING_PER_EXECUTOR = 100;
const ROWS_PER_DAY = 33_000;

const args = process.argv.slice(2);
const sizes = args.flatMap((a, i) => (a === '--rows' ? [Number(args[i + 1])] : []));
const withIndex = args.includes('--index');
/** Keep the database for EXPLAIN (drop it yourself). */
const keep = args.includes('--keep');
const tickCount = (args.includes('--ticks') ? Number(args[args.indexOf('--ticks') + 1]) : 0) || 30;

/** Set-based data: one INSERT … SELECT generate_series per table. */
async function generate(sql: pg.Pool, rows: number, app: string): Promise<void> {
  const pending = EXECUTORS * PENDING_PER_EXECUTOR;
  const terminal = Math.max(0, rows - pending);
  const spanMs = Math.round((terminal / ROWS_PER_DAY) * 86_400_000);
  await sql.query(`SET synchronous_commit = off`);
  // Terminal history, newest last; 5 % ERROR, 1 in 40 of those a replay divergence (code 26).
  await sql.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name,
                                       created_at, updated_at, completed_at, started_at_epoch_ms, recovery_attempts, queue_name)
     SELECT 'done-' || g, CASE WHEN g % 20 = 0 THEN 'ERROR' ELSE 'SUCCESS' END, 'agentWorkflow',
            'old-exec-' || (g % 500), 'v1', $2,
            t - 60000, t, t, t - 60000, 1, CASE WHEN g % 2 = 0 THEN 'agents' END
       FROM generate_series(1, $1::int) g,
            LATERAL (SELECT ((EXTRACT(EPOCH FROM now()) * 1000)::bigint - 600000 - $3::bigint + ($3::bigint * g / GREATEST($1, 1))) AS t) x`,
    [terminal, app, spanMs],
  );
  await sql.query(
    `INSERT INTO dbos.workflow_output (workflow_uuid, error)
     SELECT 'done-' || g,
            CASE WHEN g % 800 = 0
                 THEN '{"json":{"dbosErrorCode":26,"workflowID":"done-' || g || '","stepID":1,"name":"Error","message":"During execution ... Check that your workflow is deterministic."},"__dbos_serializer":"superjson"}'
                 ELSE '{"json":{"name":"Error","message":"tool failed"},"__dbos_serializer":"superjson"}' END
       FROM generate_series(20, $1::int, 20) g`,
    [terminal],
  );
  // PENDING: claimed over the last two hours; one checkpoint every ~10 min since, the last within 10 min
  // for most (so the stuck pass has to look past the row's own timestamps for half of them).
  await sql.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name,
                                       created_at, updated_at, started_at_epoch_ms, recovery_attempts, queue_name, owner_xid)
     SELECT 'pend-' || g, 'PENDING', 'agentWorkflow', 'exec-' || lpad((g % $1)::text, 3, '0'), 'v1', $3,
            t, t, t, 1, CASE WHEN g % 2 = 0 THEN 'agents' END, md5(g::text)
       FROM generate_series(1, $2::int) g,
            LATERAL (SELECT (EXTRACT(EPOCH FROM now()) * 1000)::bigint - (g * 7919 % 7200) * 1000 AS t) x`,
    [EXECUTORS, pending, app],
  );
  await sql.query(
    `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, output, started_at_epoch_ms, completed_at_epoch_ms)
     SELECT w.workflow_uuid, s, 'step-' || s, '{"json":"ok","__dbos_serializer":"superjson"}', w.started_at_epoch_ms + s * 600000,
            LEAST(w.started_at_epoch_ms + (s + 1) * 600000, (EXTRACT(EPOCH FROM now()) * 1000)::bigint - 1000)
       FROM dbos.workflow_status w, generate_series(0, 11) s
      WHERE w.status = 'PENDING' AND w.started_at_epoch_ms + s * 600000 < (EXTRACT(EPOCH FROM now()) * 1000)::bigint`,
  );
  await sql.query(
    `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, output, started_at_epoch_ms, completed_at_epoch_ms)
     SELECT w.workflow_uuid, s, 'step-' || s, '{"json":"ok","__dbos_serializer":"superjson"}', w.created_at, w.completed_at
       FROM dbos.workflow_status w, generate_series(0, 1) s WHERE w.status <> 'PENDING'`,
  );
  await sql.query(`ANALYZE`);
}

interface Stats {
  medianMs: number;
  p95Ms: number;
  maxMs: number;
}

function stats(times: number[]): Stats {
  const t = [...times].sort((a, b) => a - b);
  const q = (p: number) => t[Math.min(t.length - 1, Math.floor(p * t.length))] ?? 0;
  return { medianMs: q(0.5), p95Ms: q(0.95), maxMs: t[t.length - 1] ?? 0 };
}

interface Measured {
  rows: number;
  index: boolean;
  /** The first tick of an invocation (diverged over its whole lookback). */
  full: Stats;
  /** Every later tick (diverged incrementally). Both run the dead pass and the stuck pass's slice. */
  steady: Stats;
  /** Mean per pass over the first ticks (the orphaned-versions pass runs on every first tick). */
  passes: { dead: number; stuck: number; diverged: number; orphaned: number };
}

/** One generated database, ready to tick. */
interface Bench {
  rows: number;
  name: string;
  app: string;
  pool: pg.Pool;
  deps: ReaperDeps;
  keys: string[];
  state: ReaperState;
}

async function setUp(rows: number): Promise<Bench> {
  const name = `afterlife_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
  const app = `bench-${randomBytes(3).toString('hex')}`;
  const url = await createDbosDatabase(name);
  const redis = createRedis(REDIS_URL);
  // The same session settings as afterlife's pool (packages/executor/src/db/pool.ts), JIT off included.
  const pool = new pg.Pool({ connectionString: url, max: 3, application_name: 'afterlife-bench', options: '-c jit=off' });
  const keys = Array.from({ length: EXECUTORS - 1 }, (_, i) => heartbeatKey(app, `exec-${String(i + 1).padStart(3, '0')}`));
  const t0 = Date.now();
  await generate(pool, rows, app);
  // What autovacuum would have done by now on a table this old (visibility map, statistics).
  await pool.query('VACUUM ANALYZE');
  const counts = await pool.query<{ ws: string; oo: string }>(
    `SELECT (SELECT count(*) FROM dbos.workflow_status)::text AS ws, (SELECT count(*) FROM dbos.operation_outputs)::text AS oo`,
  );
  console.error(`  ${name}: ${counts.rows[0]?.ws} workflow_status, ${counts.rows[0]?.oo} operation_outputs rows in ${Date.now() - t0} ms`);
  // exec-000 is dead: no key. The other 99 beat (the keys outlive the bench; deleted at the end).
  const beat = JSON.stringify({
    executorId: 'x',
    applicationName: app,
    applicationVersion: 'v1',
    state: 'alive',
    startedAt: new Date().toISOString(),
    beatAt: new Date().toISOString(),
    inFlight: 1,
  });
  await redis.mset(...keys.flatMap((k) => [k, beat]));
  // Every executor was seen beating before (it has the kit).
  await pool.query(
    `INSERT INTO afterlife.executor_observations (application_name, executor_id, last_beat_seen_at)
     SELECT $1, 'exec-' || lpad(g::text, 3, '0'), now() - interval '1 min' FROM generate_series(0, $2::int - 1) g`,
    [app, EXECUTORS],
  );
  // A 1 h TTL: exec-000 is absent on every tick but only the declaring tick (backdated) declares it.
  const config = loadConfig({
    DATABASE_URL: url,
    DBOS_APPLICATION_NAME: app,
    REDIS_URL,
    HEARTBEAT_TTL_MS: '3600000',
    REAPER_TICK_MS: '5000',
  });
  const deps: ReaperDeps = {
    config,
    db: afterlifeDb(pool, 3),
    redis,
    lock: undefined,
    publisher: undefined,
    logger: silentLogger(),
    faults: noFaults,
    clock: Date.now,
    detectedBy: 'bench',
  };
  return { rows, name, app, pool, deps, keys, state: {} };
}

async function tearDown(b: Bench): Promise<void> {
  const redis = b.deps.redis;
  await redis?.del(...b.keys, sentinelKey(b.app)).catch(() => undefined);
  redis?.disconnect();
  await b.pool.end();
  if (keep) console.error(`  kept database ${b.name} (app ${b.app})`);
  else await dropDatabase(b.name);
}

async function tick(b: Bench, i: number, state: ReaperState): Promise<TickResult> {
  const r = await runTick(b.deps, { tick: i, dryRun: false, planned: [], budget: unlimitedBudget() }, state);
  for (const p of [r.dead, r.stuck, r.diverged, r.orphaned]) if (p.kind === 'error') throw new Error(`tick ${i}: ${p.error}`);
  return r;
}

/**
 * Ticks the databases in turn (A, B, A, B, …) so the shared machine's noise lands on every size alike, and
 * the 1M/100k ratio compares like with like.
 */
async function measure(benches: Bench[], index: boolean): Promise<Measured[]> {
  for (const b of benches) for (let i = 1; i <= 3; i++) await tick(b, i, {}); // warm-up: caches, sentinel, absences
  const full = benches.map(() => [] as number[]);
  const steady = benches.map(() => [] as number[]);
  const passes = benches.map(() => ({ dead: 0, stuck: 0, diverged: 0, orphaned: 0 }));
  for (const b of benches) {
    b.state = {};
    await tick(b, 99, b.state);
  }
  for (let i = 0; i < tickCount; i++) {
    for (const [k, b] of benches.entries()) {
      const f = await tick(b, 100 + i, {});
      full[k]?.push(f.durationMs);
      const p = passes[k];
      if (p) {
        p.dead += f.dead.durationMs;
        p.stuck += f.stuck.durationMs;
        p.diverged += f.diverged.durationMs;
        p.orphaned += f.orphaned.durationMs;
      }
      steady[k]?.push((await tick(b, 1000 + i, b.state)).durationMs);
    }
  }
  return benches.map((b, k) => {
    const p = passes[k] ?? { dead: 0, stuck: 0, diverged: 0, orphaned: 0 };
    return {
      rows: b.rows,
      index,
      full: stats(full[k] ?? []),
      steady: stats(steady[k] ?? []),
      passes: {
        dead: round(p.dead / tickCount),
        stuck: round(p.stuck / tickCount),
        diverged: round(p.diverged / tickCount),
        orphaned: round(p.orphaned / tickCount),
      },
    };
  });
}

/** The tick that declares exec-000 (its absence backdated past the TTL) and recovers its 100 rows inline. */
async function declaringTick(b: Bench): Promise<{ ms: number; reenqueued: number }> {
  // Backdated, not slept: Redis has kept its keys for longer than the 1 h TTL (an absent key means silence
  // only then), and exec-000's key has been absent for two hours over one earlier observation, so this tick
  // is the second observation of the streak that the death rule needs.
  await b.deps.redis?.set(sentinelKey(b.app), new Date(Date.now() - 2 * 3_600_000).toISOString());
  await b.pool.query(
    `UPDATE afterlife.executor_observations
        SET evidence = 'heartbeat', first_absent_at = now() - interval '2 hours', last_absent_at = now() - interval '1 second', absent_ticks = 1
      WHERE application_name = $1 AND executor_id = 'exec-000'`,
    [b.app],
  );
  const r = await tick(b, 9999, {});
  if (r.dead.kind !== 'ran' || !r.dead.declared.includes('exec-000')) throw new Error('the dead executor was not declared');
  return { ms: r.durationMs, reenqueued: r.dead.reenqueued };
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

const benches: Bench[] = [];
try {
  for (const rows of sizes.length ? sizes : [100_000, 1_000_000]) {
    console.error(`bench: generating ${rows} rows`);
    benches.push(await setUp(rows));
  }
  const results = await measure(benches, false);
  if (withIndex) {
    // The same data, after the opt-in index (built CONCURRENTLY, then statistics).
    for (const b of benches) {
      await applyOptInIndexes(b.deps.db);
      await b.pool.query('VACUUM ANALYZE dbos.workflow_status');
    }
    results.push(...(await measure(benches, true)));
  }
  const declaring = [];
  for (const b of benches) declaring.push({ rows: b.rows, ...(await declaringTick(b)) });
  for (const m of results) {
    console.error(
      `  ${m.rows} rows${m.index ? ' + opt-in index' : ''}: later ticks median ${m.steady.medianMs} ms (p95 ${m.steady.p95Ms}); ` +
        `first ticks median ${m.full.medianMs} ms (p95 ${m.full.p95Ms}; dead ${m.passes.dead}, stuck ${m.passes.stuck}, diverged ${m.passes.diverged}, orphaned ${m.passes.orphaned})`,
    );
  }
  for (const d of declaring) console.error(`  ${d.rows} rows: declaring tick ${d.ms} ms (${d.reenqueued} re-enqueued)`);
  for (const index of withIndex ? [false, true] : [false]) {
    const small = results.find((r) => r.rows === 100_000 && r.index === index);
    const big = results.find((r) => r.rows === 1_000_000 && r.index === index);
    if (small && big) {
      console.error(
        `ratio 1M/100k${index ? ' (index)' : ''}: later ticks ${round(big.steady.medianMs / small.steady.medianMs)}, first ticks ${round(big.full.medianMs / small.full.medianMs)}`,
      );
    }
  }
  console.log(JSON.stringify({ results, declaring }, null, 2));
} finally {
  for (const b of benches) await tearDown(b).catch((err: unknown) => console.error(`teardown of ${b.name} failed`, err));
}
process.exit(0);
