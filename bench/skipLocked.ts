/**
 * Question: what would it cost a recovery batch to pass over rows another transaction holds on every batch
 * (the candidate scan's `FOR NO KEY UPDATE SKIP LOCKED`, docs/lost-transactions.md), against the batch as
 * shipped (it waits at most a second for a held row, `lock_timeout` set once per statement, and only then
 * re-runs with the lock clause)?
 *
 * Wall-clock recovery figures on a shared machine move by more than the difference, so this measures it
 * on the server: the batch statement (the candidate scan and DBOS's recovery UPDATE by tuple ID, as in
 * shared/dbos/recovery.ts, without the audit) under `EXPLAIN (ANALYZE, WAL)`, with and without the lock
 * clause, over identical clones of 10,000 orphans mixed with 40,000 other rows (bench/recovery.ts's shape,
 * the opt-in owner index), alternating which goes first. Reported per recovery (all batches): execution
 * time (median and worst of the rounds), the longest batch, and WAL records and bytes, which do not
 * depend on the machine's load.
 *
 *   npm run build && node dist/bench/skipLocked.js [orphans=10000] [rounds=8] [batch=1000]
 */
import { loadavg } from 'node:os';
import pg from 'pg';
import { applyOptInIndexes } from '../shared/db/optIn.js';
import { afterlifeDb, cloneDatabase, createDbosDatabase, dropDatabase, median } from './lib.js';

const n = Number(process.argv[2] ?? 10_000);
const rounds = Number(process.argv[3] ?? 8);
const batch = Number(process.argv[4] ?? 1_000);
const APP = 'bench-app';
const BASE = 1_700_000_000_000;

async function seed(url: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
        application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, started_at_epoch_ms, serialization)
     SELECT 'orphan-' || g, 'PENDING', 'agentWorkflow', '', '', 'dead-1', 'v1', $2, CASE WHEN g % 2 = 0 THEN 'agents' END, 1,
            md5(g::text), $3::bigint + g, $3::bigint + g, CASE WHEN g % 2 = 0 THEN $3::bigint + g END, 'js_superjson'
       FROM generate_series(1, $1) g`,
    [n, APP, BASE],
  );
  await c.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
        application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, serialization)
     SELECT 'noise-' || g, (ARRAY['PENDING', 'SUCCESS', 'SUCCESS', 'ERROR'])[1 + g % 4], 'agentWorkflow', '', '', 'live-' || (g % 20), 'v1',
            CASE WHEN g % 10 = 0 THEN 'other-app' ELSE $2 END, NULL, 1, md5(g::text), $3::bigint + g, $3::bigint + g, 'js_superjson'
       FROM generate_series(1, $1 * 4) g`,
    [n, APP, BASE],
  );
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  await applyOptInIndexes(afterlifeDb(pool, 1));
  await pool.end();
  await c.query('VACUUM ANALYZE dbos.workflow_status');
  await c.end();
}

const statement = (skipLocked: boolean) => `EXPLAIN (ANALYZE, WAL, FORMAT JSON)
  WITH candidates AS (
    SELECT ctid FROM dbos.workflow_status
     WHERE status = 'PENDING' AND executor_id = 'dead-1' AND application_version = 'v1' AND (application_name = $1 OR application_name IS NULL)
       AND created_at >= $2::bigint AND created_at <= $3::bigint AND (created_at, workflow_uuid) > ($2::bigint, '')
       ${skipLocked ? '' : "AND (SELECT set_config('lock_timeout', '1000', true)) IS NOT NULL"}
     ORDER BY created_at, workflow_uuid LIMIT $4 ${skipLocked ? 'FOR NO KEY UPDATE SKIP LOCKED' : ''})
  UPDATE dbos.workflow_status w
     SET started_at_epoch_ms = NULL, status = 'ENQUEUED', owner_xid = NULL,
         updated_at = (EXTRACT(EPOCH FROM now()) * 1000)::bigint, queue_name = COALESCE(w.queue_name, '_dbos_internal_queue')
   WHERE w.ctid = ANY (ARRAY(SELECT ctid FROM candidates)) AND w.status = 'PENDING' AND w.executor_id = 'dead-1'
     AND w.application_version = 'v1' AND (w.application_name = $1 OR w.application_name IS NULL)`;

interface Run {
  execMs: number;
  longestMs: number;
  walRecords: number;
  walBytes: number;
  left: number;
}

interface Explained {
  'Execution Time': number;
  Plan: { 'WAL Records': number; 'WAL Bytes': number };
}

async function recover(url: string, skipLocked: boolean): Promise<Run> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const run: Run = { execMs: 0, longestMs: 0, walRecords: 0, walBytes: 0, left: 0 };
  try {
    // The orphans' created_at are BASE+1..BASE+n, one each, so each batch starts where the previous ended.
    for (let from = BASE; from < BASE + n; from += batch) {
      const res = await c.query<{ 'QUERY PLAN': Explained[] }>(statement(skipLocked), [APP, String(from), String(BASE + n), batch]);
      const out = res.rows[0]?.['QUERY PLAN'][0];
      if (!out) throw new Error('no plan');
      run.execMs += out['Execution Time'];
      run.longestMs = Math.max(run.longestMs, out['Execution Time']);
      run.walRecords += out.Plan['WAL Records'];
      run.walBytes += out.Plan['WAL Bytes'];
    }
    const left = await c.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM dbos.workflow_status WHERE executor_id = 'dead-1' AND status = 'PENDING'`,
    );
    run.left = left.rows[0]?.n ?? -1;
  } finally {
    await c.end();
  }
  return run;
}

const template = `afterlife_bench_skiplocked_${process.pid}`;
await seed(await createDbosDatabase(template));
const results: Record<'wait' | 'skip', Run[]> = { wait: [], skip: [] };
const startLoad = loadavg()[0] ?? 0;
try {
  for (let r = 0; r < rounds; r++) {
    for (const variant of r % 2 === 0 ? (['wait', 'skip'] as const) : (['skip', 'wait'] as const)) {
      const name = `${template}_${variant}_${r}`;
      const url = await cloneDatabase(template, name);
      try {
        const run = await recover(url, variant === 'skip');
        if (run.left !== 0) throw new Error(`${variant}: ${run.left} orphans left`);
        results[variant].push(run);
      } finally {
        await dropDatabase(name);
      }
    }
  }
} finally {
  await dropDatabase(template);
}
const kib = (b: number) => `${(b / 1024).toFixed(0)} KiB`;
console.log(
  `${n} orphans, batches of ${batch}, ${rounds} rounds each; load ${startLoad.toFixed(1)} at the start, ${(loadavg()[0] ?? 0).toFixed(1)} at the end`,
);
console.log('| candidate scan | execution, median (worst) | longest batch, median | WAL records | WAL bytes |');
console.log('|---|---|---|---|---|');
for (const [label, runs] of [
  ['as shipped: waits ≤ 1 s (`lock_timeout`)', results.wait],
  ['`FOR NO KEY UPDATE SKIP LOCKED` on every batch', results.skip],
] as const) {
  console.log(
    `| ${label} | ${median(runs.map((x) => x.execMs)).toFixed(0)} ms (${Math.max(...runs.map((x) => x.execMs)).toFixed(0)} ms) | ` +
      `${median(runs.map((x) => x.longestMs)).toFixed(1)} ms | ${median(runs.map((x) => x.walRecords))} | ${kib(median(runs.map((x) => x.walBytes)))} |`,
  );
}
