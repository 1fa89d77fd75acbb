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
 * It then times ticks back to back (all passes; the stuck pass examines its per-tick slice of executors):
 * the first tick of an invocation, later ticks, and the tick that declares the dead executor.
 * `--index` also applies the opt-in index migration and repeats the measurement (before/after).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig } from '../shared/config/index.js';
import { applyOptInIndexes } from '../shared/db/optIn.js';
import { heartbeatKey } from '../shared/heartbeat/index.js';
import { unlimitedBudget } from '../shared/lifecycle/deadline.js';
import { createRedis } from '../shared/lock/redis.js';
import { silentLogger } from '../shared/log.js';
import { runTick } from '../shared/reaper/tick.js';
import type { ReaperDeps, ReaperState } from '../shared/reaper/types.js';
import { noFaults } from '../shared/testing/faults.js';
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
  passes: { dead: number; stuck: number; diverged: number };
  declaringTickMs: number;
  reenqueued: number;
}

async function measure(rows: number, index: boolean): Promise<Measured> {
  const name = `afterlife_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
  const app = `bench-${randomBytes(3).toString('hex')}`;
  const url = await createDbosDatabase(name);
  const redis = createRedis(REDIS_URL);
  // The same session settings as afterlife's pool (shared/db/pool.ts), JIT off included.
  const pool = new pg.Pool({ connectionString: url, max: 3, application_name: 'afterlife-bench', options: '-c jit=off' });
  const keys = Array.from({ length: EXECUTORS - 1 }, (_, i) => heartbeatKey(app, `exec-${String(i + 1).padStart(3, '0')}`));
  try {
    const db = afterlifeDb(pool, 3);
    const t0 = Date.now();
    await generate(pool, rows, app);
    const counts = await pool.query<{ ws: string; oo: string }>(
      `SELECT (SELECT count(*) FROM dbos.workflow_status)::text AS ws, (SELECT count(*) FROM dbos.operation_outputs)::text AS oo`,
    );
    console.error(`  generated ${counts.rows[0]?.ws} workflow_status, ${counts.rows[0]?.oo} operation_outputs rows in ${Date.now() - t0} ms`);
    if (index) {
      const applied = await applyOptInIndexes(db);
      await pool.query('ANALYZE');
      console.error(`  applied opt-in indexes: ${applied.join(', ')}`);
    }
    // exec-000 is dead: no key. The other 99 beat (the keys outlive the bench; deleted at the end).
    const beat = JSON.stringify({ executorId: 'x', applicationName: app, applicationVersion: 'v1', state: 'alive', startedAt: new Date().toISOString(), beatAt: new Date().toISOString(), inFlight: 1 });
    await redis.mset(...keys.flatMap((k) => [k, beat]));
    // Every executor was seen beating before (it has the kit).
    await pool.query(
      `INSERT INTO afterlife.executor_observations (application_name, executor_id, last_beat_seen_at)
       SELECT $1, 'exec-' || lpad(g::text, 3, '0'), now() - interval '1 min' FROM generate_series(0, $2::int - 1) g`,
      [app, EXECUTORS],
    );
    const config = loadConfig({ DATABASE_URL: url, DBOS_APPLICATION_NAME: app, REDIS_URL, HEARTBEAT_TTL_MS: '3600000', REAPER_TICK_MS: '5000' });
    const deps: ReaperDeps = {
      config,
      db,
      redis,
      lock: undefined,
      publisher: undefined,
      logger: silentLogger(),
      faults: noFaults,
      clock: Date.now,
      detectedBy: 'bench',
    };
    const budget = unlimitedBudget();
    const tick = async (i: number, state: ReaperState) => {
      const r = await runTick(deps, { tick: i, dryRun: false, planned: [] }, budget, state);
      for (const p of [r.dead, r.stuck, r.diverged]) if ('error' in p) throw new Error(`tick ${i}: ${p.error}`);
      return r;
    };
    // Warm-up: caches, the sentinel, the first absence observation.
    for (let i = 1; i <= 2; i++) await tick(i, {});
    // First ticks of an invocation: the diverged pass looks back over its whole window.
    const full: number[] = [];
    const passes = { dead: 0, stuck: 0, diverged: 0 };
    for (let i = 0; i < tickCount; i++) {
      const r = await tick(100 + i, {});
      full.push(r.durationMs);
      passes.dead += r.dead.durationMs;
      passes.stuck += r.stuck.durationMs;
      passes.diverged += r.diverged.durationMs;
    }
    // Every later tick: the diverged pass only looks since the previous tick.
    const state: ReaperState = {};
    await tick(200, state);
    const steady: number[] = [];
    for (let i = 0; i < tickCount; i++) steady.push((await tick(201 + i, state)).durationMs);
    // The declaring tick: exec-000's key has been gone for a TTL (backdated; the TTL is 1 h so no earlier tick declares it), seen on many ticks.
    await pool.query(`UPDATE afterlife.executor_observations SET first_absent_at = now() - interval '2 hours' WHERE application_name = $1 AND executor_id = 'exec-000'`, [app]);
    const decl = await tick(999, {});
    if ('error' in decl.dead) throw new Error(decl.dead.error);
    if (!decl.dead.declared.includes('exec-000')) throw new Error('the dead executor was not declared');
    const n = tickCount;
    return {
      rows,
      index,
      full: stats(full),
      steady: stats(steady),
      passes: { dead: round(passes.dead / n), stuck: round(passes.stuck / n), diverged: round(passes.diverged / n) },
      declaringTickMs: decl.durationMs,
      reenqueued: decl.dead.reenqueued,
    };
  } finally {
    await redis.del(...keys, `afterlife:${app}:reaper:sentinel`).catch(() => undefined);
    redis.disconnect();
    await pool.end();
    if (keep) console.error(`  kept database ${name} (app ${app})`);
    else await dropDatabase(name);
  }
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

const results: Measured[] = [];
for (const rows of sizes.length ? sizes : [100_000, 1_000_000]) {
  for (const index of withIndex ? [false, true] : [false]) {
    console.error(`bench: ${rows} rows${index ? ' with the opt-in index' : ''}`);
    const m = await measure(rows, index);
    console.error(
      `  steady tick median ${m.steady.medianMs} ms (p95 ${m.steady.p95Ms}); full tick median ${m.full.medianMs} ms (p95 ${m.full.p95Ms}; ` +
        `dead ${m.passes.dead}, stuck ${m.passes.stuck}, diverged ${m.passes.diverged}); declaring tick ${m.declaringTickMs} ms (${m.reenqueued} re-enqueued)`,
    );
    results.push(m);
  }
}
console.log(JSON.stringify(results, null, 2));
for (const index of withIndex ? [false, true] : [false]) {
  const small = results.find((r) => r.rows === 100_000 && r.index === index);
  const big = results.find((r) => r.rows === 1_000_000 && r.index === index);
  if (small && big) {
    console.error(
      `ratio 1M/100k${index ? ' (index)' : ''}: steady ${round(big.steady.medianMs / small.steady.medianMs)}, full ${round(big.full.medianMs / small.full.medianMs)}`,
    );
  }
}
process.exit(0);
