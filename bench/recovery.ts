/**
 * Question: does afterlife's batched recovery cost more than DBOS's own single recovery statement, and
 * how long does any one statement hold row locks?
 *
 * For N orphans (10k, 100k, 1M) of a dead executor, shaped like DBOS's rows and mixed with 4×N rows of other
 * executors, statuses and apps, one template database is cloned per run so both methods see identical data.
 * Runs alternate (DBOS, afterlife, DBOS, afterlife, …) to spread the machine's noise over both.
 *
 * A bare batched UPDATE (DBOS's statement in keyset batches, nothing of afterlife's: no range read, audit or
 * guard premise) runs beside them: the floor of what batching itself costs on this machine.
 *
 * A third method runs `recoverExecutor` as shipped (the Redis lock, the registry, PENDING counts per
 * version, the audit and the recovery statement in batches of the first batch size), so the figure is
 * what a death notice costs end to end, not only its statements.
 * A fourth runs it without opening the death's timeline (`recordTimeline: false`, issue 29: what the timeline costs).
 *
 * "afterlife batched" includes the one read that gives the batches their range (`pendingByVersion`: count,
 * oldest and newest PENDING row per version), since the batches cannot run without it. Per size, the
 * per-statement trace of the slowest batched run is printed to stderr: the range read, then the batch
 * statements by tenths of the recovery (median / max) and the last three batches, where an unbounded scan
 * used to cost the most.
 *
 *   npm run build && node dist/bench/recovery.js [sizes=10000,100000,1000000] [reps=7,7,3] [batchSizes=1000] [--no-index]
 *
 * The template has afterlife's opt-in PENDING-owner index (shared/db/migrations/optin/), the configuration
 * docs/reaper.md#recommended-index recommends, so both methods run with it; `--no-index` leaves DBOS's own indexes only.
 *
 * `reps` is one count per size (the last one repeats): a 1M run costs about two minutes on the 2-core machine.
 */
import pg from 'pg';
import { applyOptInIndexes } from '../shared/db/optIn.js';
import type { Db } from '../packages/executor/src/db/pool.js';
import { pendingByVersion } from '../packages/executor/src/dbos/pendingByVersion.js';
import { reenqueueBatch, type BatchCursor } from '../shared/dbos/recovery.js';
import { deathNotice } from '../packages/executor/src/contract/deathNotice.js';
import { RedisLock } from '../shared/lock/lock.js';
import { createRedis, waitReady } from '../packages/executor/src/lock/redis.js';
import { silentLogger } from '../packages/executor/src/log.js';
import { recoverExecutor } from '../shared/recovery/recoverExecutor.js';
import { admin, afterlifeDb, cloneDatabase, createDbosDatabase, dropDatabase, median, ms } from './lib.js';

const withIndex = !process.argv.includes('--no-index');
const positional = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const sizes = (positional[0] ?? '10000,100000,1000000').split(',').map(Number);
const repsList = (positional[1] ?? '7,7,3').split(',').map(Number);
const repsFor = (i: number) => repsList[Math.min(i, repsList.length - 1)] ?? 3;
const batchSizes = (positional[2] ?? '1000').split(',').map(Number);
const APP = 'bench-app';

async function seed(url: string, n: number): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  // Orphans of 'dead-1' (v1), then noise: live executors' PENDING rows, finished rows, another app's orphans.
  await c.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
        application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, started_at_epoch_ms, serialization)
     SELECT 'orphan-' || g, 'PENDING', 'agentWorkflow', '', '', 'dead-1', 'v1', $2,
            CASE WHEN g % 2 = 0 THEN 'agents' END, 1, md5(g::text), 1700000000000 + g, 1700000000000 + g,
            CASE WHEN g % 2 = 0 THEN 1700000000000 + g END, 'js_superjson'
       FROM generate_series(1, $1) g`,
    [n, APP],
  );
  await c.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
        application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, serialization)
     SELECT 'noise-' || g,
            (ARRAY['PENDING', 'SUCCESS', 'SUCCESS', 'ERROR'])[1 + g % 4],
            'agentWorkflow', '', '', 'live-' || (g % 20), 'v1',
            CASE WHEN g % 10 = 0 THEN 'other-app' ELSE $2 END,
            NULL, 1, md5(g::text), 1700000000000 + g, 1700000000000 + g, 'js_superjson'
       FROM generate_series(1, $1 * 4) g`,
    [n, APP],
  );
  if (withIndex) {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    await applyOptInIndexes(afterlifeDb(pool, 1));
    await pool.end();
  }
  await c.query('VACUUM ANALYZE dbos.workflow_status');
  await c.end();
}

/** DBOS's statement, verbatim from recoverPendingWorkflows, as one statement over every orphan. */
async function runDbos(url: string): Promise<{ total: number; longest: number; rows: number }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const t = process.hrtime.bigint();
  const res = await c.query(
    `UPDATE dbos.workflow_status
        SET started_at_epoch_ms = NULL, status = 'ENQUEUED', owner_xid = NULL,
            updated_at = (EXTRACT(EPOCH FROM now()) * 1000)::bigint,
            queue_name = COALESCE(queue_name, '_dbos_internal_queue')
      WHERE status = 'PENDING' AND executor_id = $1 AND application_version = $2
        AND (application_name = ANY($3) OR application_name IS NULL)
      RETURNING workflow_uuid`,
    ['dead-1', 'v1', [APP]],
  );
  const total = ms(t);
  await c.end();
  return { total, longest: total, rows: res.rowCount ?? 0 };
}

/**
 * The floor of batching: DBOS's statement cut into keyset batches of `batchSize` and nothing else (no range
 * read, no audit, no guard premise, no row-comparison cursor). What it costs over DBOS's single statement
 * is the price of batching itself on this machine; what afterlife costs over it is afterlife's own.
 */
async function runBare(url: string, batchSize: number): Promise<{ total: number; longest: number; rows: number }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  let cursor = '0';
  let rows = 0;
  let longest = 0;
  const t = process.hrtime.bigint();
  for (;;) {
    const s = process.hrtime.bigint();
    const res = await c.query<{ created_at: string }>({
      name: 'bare',
      text: `UPDATE dbos.workflow_status
                SET started_at_epoch_ms = NULL, status = 'ENQUEUED', owner_xid = NULL,
                    updated_at = (EXTRACT(EPOCH FROM now()) * 1000)::bigint,
                    queue_name = COALESCE(queue_name, '_dbos_internal_queue')
              WHERE ctid = ANY (ARRAY(SELECT ctid FROM dbos.workflow_status
                                       WHERE status = 'PENDING' AND executor_id = $1 AND application_version = $2 AND created_at > $3::bigint
                                       ORDER BY created_at LIMIT $4))
                AND status = 'PENDING' AND executor_id = $1
              RETURNING created_at::text`,
      values: ['dead-1', 'v1', cursor, batchSize],
    });
    longest = Math.max(longest, ms(s));
    rows += res.rowCount ?? 0;
    // The seed gives every orphan its own created_at, so created_at alone is a keyset cursor here.
    for (const r of res.rows) if (BigInt(r.created_at) > BigInt(cursor)) cursor = r.created_at;
    if ((res.rowCount ?? 0) < batchSize) break;
  }
  const total = ms(t);
  await c.end();
  return { total, longest, rows };
}

interface Trace {
  rangeMs: number;
  batchMs: number[];
  /** When each batch over SLOW_MS ended (wall clock), to set beside the server log's checkpoint lines. */
  slowAt: string[];
}

/** The lock bound the issue sets for one statement. */
const SLOW_MS = 100;

/**
 * afterlife's path: the range read, then the same statement in keyset batches of `batchSize`, each
 * recording its IDs in the audit.
 */
async function runAfterlife(url: string, batchSize: number): Promise<{ total: number; longest: number; rows: number; trace: Trace }> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const db = afterlifeDb(pool, 1);
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO afterlife.recoveries (application_name, executor_id, reason, detected_by, recovered_by, lock_mode)
     VALUES ($1, 'dead-1', 'manual', 'bench', 'bench', 'locked') RETURNING id::text`,
    [APP],
  );
  const recoveryId = Number(rows[0]?.id);
  let after: BatchCursor | undefined;
  let longest = 0;
  let moved = 0;
  let batchNo = 0;
  const batchMs: number[] = [];
  const slowAt: string[] = [];
  const t = process.hrtime.bigint();
  const pending = await pendingByVersion(db, APP, 'dead-1');
  const rangeMs = ms(t);
  const v1 = pending.find((p) => p.applicationVersion === 'v1');
  if (!v1) throw new Error('no PENDING rows of dead-1/v1');
  const range = v1.created;
  let unscanned = v1.count;
  for (;;) {
    const s = process.hrtime.bigint();
    const batch = await reenqueueBatch(
      db,
      { applicationName: APP, executorId: 'dead-1', applicationVersion: 'v1' },
      {
        limit: batchSize,
        range,
        after,
        recoveryId,
        batchNo: ++batchNo,
        unscanned,
      },
    );
    unscanned -= batch.candidates;
    const took = ms(s);
    batchMs.push(took);
    if (took > SLOW_MS) slowAt.push(`batch ${batchNo} ${took.toFixed(0)} ms ending ${new Date().toISOString().slice(11, 23)}`);
    longest = Math.max(longest, took);
    moved += batch.moved;
    if (!batch.next) break;
    after = batch.next;
  }
  const total = ms(t);
  await pool.end();
  return { total, longest, rows: moved, trace: { rangeMs, batchMs, slowAt } };
}

function printTrace(n: number, batchSize: number, total: number, trace: Trace): void {
  const xs = trace.batchMs;
  const tenths: string[] = [];
  for (let d = 0; d < 10; d++) {
    const slice = xs.slice(Math.floor((d * xs.length) / 10), Math.floor(((d + 1) * xs.length) / 10));
    if (slice.length) tenths.push(`${median(slice).toFixed(0)}/${Math.max(...slice).toFixed(0)}`);
  }
  const last = xs
    .slice(-3)
    .map((x) => x.toFixed(1))
    .join(', ');
  console.error(
    `trace ${n.toLocaleString('en')} orphans, batch ${batchSize}, slowest run ${total.toFixed(0)} ms: range read ${trace.rangeMs.toFixed(1)} ms; ` +
      `${xs.length} batches, ms median/max by tenths [${tenths.join(' ')}]; last three ${last}; longest ${Math.max(...xs).toFixed(1)} ms (batch ${xs.indexOf(Math.max(...xs)) + 1})` +
      (trace.slowAt.length ? `; over ${SLOW_MS} ms (UTC): ${trace.slowAt.join(', ')}` : ''),
  );
}

/** recoverExecutor end to end, timing its batch statements on the way. */
async function runShipped(
  url: string,
  batchSize: number,
  recordTimeline = true,
): Promise<{ total: number; longest: number; rows: number }> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const inner = afterlifeDb(pool, 1);
  let longest = 0;
  const db: Db = {
    ...inner,
    budget: inner.budget,
    query: async (text, values, tag, o) => {
      const s = process.hrtime.bigint();
      try {
        return await inner.query(text, values, tag, o);
      } finally {
        if (tag === 'recover.batch') longest = Math.max(longest, ms(s));
      }
    },
    transaction: (fn, tag) => inner.transaction(fn, tag),
    end: () => inner.end(),
  };
  const redis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  // Connections are made before the clock starts, as for the other two methods: a running function has them.
  await pool.query('SELECT 1');
  await waitReady(redis, 5000);
  await redis.ping();
  const t = process.hrtime.bigint();
  const out = await recoverExecutor(
    {
      db,
      redis,
      lock: new RedisLock(redis),
      logger: silentLogger(),
      batchSize,
      lockTtlMs: 30_000,
      clock: Date.now,
      recoveredBy: 'bench',
      recordTimeline,
    },
    deathNotice({ executorId: 'dead-1', applicationName: APP, reason: 'manual', detectedBy: 'bench' }),
  );
  const total = ms(t);
  redis.disconnect();
  await pool.end();
  return { total, longest, rows: out.outcome === 'false-alarm' ? 0 : out.reenqueued };
}

const lines: string[] = [];
for (const [i, n] of sizes.entries()) {
  const reps = repsFor(i);
  const template = `afterlife_bench_tpl_${process.pid}`;
  const t = process.hrtime.bigint();
  await seed(await createDbosDatabase(template), n);
  console.error(`seeded ${n} orphans + ${4 * n} other rows in ${(ms(t) / 1000).toFixed(1)} s${withIndex ? ' (+ opt-in index)' : ''}`);
  const dbos: number[] = [];
  const ours = new Map<number, number[]>(batchSizes.map((b) => [b, []]));
  const slowest = new Map<number, { total: number; trace: Trace }>();
  const longestOurs = new Map<number, number>(batchSizes.map((b) => [b, 0]));
  let longestDbos = 0;
  const shipped: number[] = [];
  let longestShipped = 0;
  // The same, without opening the death's timeline (issue 29: what the timeline costs a recovery).
  const untimed: number[] = [];
  let longestUntimed = 0;
  const bare: number[] = [];
  let longestBare = 0;
  for (let r = 0; r < reps; r++) {
    // With and without the timeline swap places every repetition, so neither always runs second.
    const pair = r % 2 === 0 ? (['shipped', 'untimed'] as const) : (['untimed', 'shipped'] as const);
    for (const method of ['dbos', 'bare', ...batchSizes, ...pair] as const) {
      const name = `afterlife_bench_run_${process.pid}`;
      const url = await cloneDatabase(template, name);
      // Cloning writes the whole database to WAL; a checkpoint landing inside a timed run is the largest
      // source of noise here, so each run starts right after one.
      await admin((c) => c.query('CHECKPOINT'));
      const check = (rows: number) => {
        if (rows !== n) throw new Error(`${method} moved ${rows} rows, expected ${n}`);
      };
      if (method === 'dbos') {
        const out = await runDbos(url);
        check(out.rows);
        dbos.push(out.total);
        longestDbos = Math.max(longestDbos, out.longest);
      } else if (method === 'bare') {
        const out = await runBare(url, batchSizes[0] ?? 1000);
        check(out.rows);
        bare.push(out.total);
        longestBare = Math.max(longestBare, out.longest);
      } else if (method === 'shipped') {
        const out = await runShipped(url, batchSizes[0] ?? 1000);
        check(out.rows);
        shipped.push(out.total);
        longestShipped = Math.max(longestShipped, out.longest);
      } else if (method === 'untimed') {
        const out = await runShipped(url, batchSizes[0] ?? 1000, false);
        check(out.rows);
        untimed.push(out.total);
        longestUntimed = Math.max(longestUntimed, out.longest);
      } else {
        const out = await runAfterlife(url, method);
        check(out.rows);
        ours.get(method)?.push(out.total);
        if (out.total > (slowest.get(method)?.total ?? -1)) slowest.set(method, { total: out.total, trace: out.trace });
        longestOurs.set(method, Math.max(longestOurs.get(method) ?? 0, out.longest));
      }
      await dropDatabase(name);
    }
  }
  await dropDatabase(template);
  for (const [b, s] of slowest) printTrace(n, b, s.total, s.trace);
  for (const b of batchSizes) {
    const mine = median(ours.get(b) ?? []);
    lines.push(
      `| ${n.toLocaleString('en')} (${reps}) | ${b} | ${median(dbos).toFixed(0)} ms | ${mine.toFixed(0)} ms | ${(mine / median(dbos)).toFixed(2)} | ${longestDbos.toFixed(0)} ms | ${(longestOurs.get(b) ?? 0).toFixed(1)} ms |`,
    );
  }
  const floor = median(bare);
  lines.push(
    `| ${n.toLocaleString('en')} (${reps}) | ${batchSizes[0] ?? 1000}, bare batched UPDATE (the floor of batching) | ${median(dbos).toFixed(0)} ms | ${floor.toFixed(0)} ms | ${(floor / median(dbos)).toFixed(2)} | ${longestDbos.toFixed(0)} ms | ${longestBare.toFixed(1)} ms |`,
  );
  const whole = median(shipped);
  lines.push(
    `| ${n.toLocaleString('en')} (${reps}) | ${batchSizes[0] ?? 1000}, recoverExecutor as shipped | ${median(dbos).toFixed(0)} ms | ${whole.toFixed(0)} ms | ${(whole / median(dbos)).toFixed(2)} | ${longestDbos.toFixed(0)} ms | ${longestShipped.toFixed(1)} ms |`,
  );
  const noTimeline = median(untimed);
  lines.push(
    `| ${n.toLocaleString('en')} (${reps}) | ${batchSizes[0] ?? 1000}, recoverExecutor without its timeline | ${median(dbos).toFixed(0)} ms | ${noTimeline.toFixed(0)} ms | ${(noTimeline / median(dbos)).toFixed(2)} | ${longestDbos.toFixed(0)} ms | ${longestUntimed.toFixed(1)} ms |`,
  );
  console.error(
    `timeline ${n.toLocaleString('en')} orphans: recoverExecutor median ${whole.toFixed(1)} ms with the timeline, ${noTimeline.toFixed(1)} ms without (${(whole - noTimeline).toFixed(1)} ms)`,
  );
}
console.log(withIndex ? "indexes: DBOS's own + afterlife's opt-in owner index (recommended)" : "indexes: DBOS's own only (--no-index)");
console.log(
  '| orphans (runs) | batch | DBOS single statement (median) | afterlife batched (median) | ratio | longest statement, DBOS | longest statement, afterlife |',
);
console.log('|---|---|---|---|---|---|---|');
for (const l of lines) console.log(l);
