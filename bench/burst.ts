/**
 * Question: when many executors die at once (a deploy, a zone failure), how long until all their work is
 * re-enqueued, and then how long until DBOS's live executors have started it all?
 *
 * E executors (default 50) with W PENDING workflows each (default 1,000) are dead; E death notices are
 * POSTed together to the served `executorDeath` function (functions-framework's test server, one instance,
 * the default pool `DB_POOL_MAX`=3, real Redis lock). It reports, from the first delivery: when every
 * delivery was answered and how (no nack may happen), when the last row was re-enqueued, the peak of
 * afterlife's sessions in pg_stat_activity (sampled on another connection), and whether the audit holds
 * every workflow exactly once.
 *
 * Phase two (skipped with `--no-dbos`) starts the same data again from a clone and lets K live DBOS
 * executors (the example agent app, instant workflows of zero steps) claim and run the re-enqueued rows,
 * timing from the first delivery to the last row SUCCESS, for each K in `--live`. That part is DBOS's own
 * dispatch; afterlife's share ends at the re-enqueue.
 *
 *   npm run build && node dist/bench/burst.js [--executors 50] [--per 1000] [--live 1,4] [--live-per 1000] [--no-dbos] [--index]
 *
 * `--live-per` seeds fewer rows per executor for phase two (DBOS runs ~1,000 workflows/s on this machine,
 * so 50,000 would take about a minute per run); `--index` applies the opt-in PENDING-owner index first.
 */
import type { AddressInfo } from 'node:net';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import pg from 'pg';
import '../functions/index.js';
import { useRuntime } from '../functions/runtime.js';
import { applyOptInIndexes } from '../shared/db/optIn.js';
import { deathNotice } from '../packages/executor/src/contract/deathNotice.js';
import { silentLogger } from '../packages/executor/src/log.js';
import { createRuntime, type Runtime } from '../shared/runtime.js';
import { startAgentExecutor, type AgentExecutor } from '../scripts/stack/executor.js';
import { admin, afterlifeDb, cloneDatabase, createDbosDatabase, dropDatabase, ms } from './lib.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string) => (args.includes(name) ? (args[args.indexOf(name) + 1] ?? dflt) : dflt);
const EXECUTORS = Number(opt('--executors', '50'));
const PER = Number(opt('--per', '1000'));
const LIVE = opt('--live', '1,4').split(',').map(Number);
const LIVE_PER = Number(opt('--live-per', String(PER)));
const withDbos = !args.includes('--no-dbos');
const withIndex = args.includes('--index');
const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const APP = `bench-burst-${process.pid}`;
const SESSION = `afterlife-burst-${process.pid}`;
const deadId = (i: number) => `dead-${String(i).padStart(3, '0')}`;

/** Dead executors' PENDING rows (with their inputs, so a live executor can run them), plus history. */
async function seed(url: string, per: number): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
        application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, serialization)
     SELECT 'wf-' || e || '-' || g, 'PENDING', 'agentWorkflow', '', '', 'dead-' || lpad(e::text, 3, '0'), 'v1', $3,
            NULL, 1, md5(e || '-' || g), 1700000000000 + g * $1 + e, 1700000000000 + g * $1 + e, 'js_superjson'
       FROM generate_series(0, $1 - 1) e, generate_series(1, $2) g`,
    [EXECUTORS, per, APP],
  );
  await c.query(
    `INSERT INTO dbos.workflow_input (workflow_uuid, inputs)
     SELECT workflow_uuid, '{"json":[{"steps":0,"stepMs":0}],"__dbos_serializer":"superjson"}' FROM dbos.workflow_status`,
  );
  await c.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
        application_name, queue_name, recovery_attempts, created_at, updated_at, completed_at, serialization)
     SELECT 'done-' || g, 'SUCCESS', 'agentWorkflow', '', '', 'old-' || (g % 20), 'v1', $2, NULL, 1,
            1690000000000 + g, 1690000000000 + g, 1690000000000 + g, 'js_superjson'
       FROM generate_series(1, $1) g`,
    [EXECUTORS * per, APP],
  );
  await c.query('VACUUM ANALYZE');
  await c.end();
}

async function runtimeFor(url: string): Promise<Runtime> {
  return createRuntime({
    env: { DATABASE_URL: url, DBOS_APPLICATION_NAME: APP, REDIS_URL, REDIS_KEY_PREFIX: `bench-burst-${process.pid}`, LOG_LEVEL: 'ERROR' },
    logger: silentLogger(),
    publisher: 'none',
    sessionName: SESSION,
  });
}

interface BurstResult {
  answeredMs: number;
  reenqueuedMs: number;
  statuses: number[];
  peak: number;
  audited: number;
  distinct: number;
  rows: number;
}

/** The E notices together against one served instance; `onFirstDelivery` marks t0 for phase two. */
async function burst(url: string, rows: number): Promise<BurstResult & { t0: bigint }> {
  const rt = await runtimeFor(url);
  useRuntime(rt);
  const server = getTestServer('executorDeath');
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const target = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const monitor = new pg.Client({ connectionString: url });
  await monitor.connect();
  await rt.db.query('SELECT 1'); // a warm instance: cold start is measured elsewhere
  let peak = 0;
  let sampling = true;
  let reenqueuedAt: bigint | undefined;
  const sampler = (async () => {
    while (sampling) {
      const r = await monitor.query<{ n: number; moved: number }>(
        `SELECT (SELECT count(*)::int FROM pg_stat_activity WHERE application_name = $1 AND backend_type = 'client backend') AS n,
                (SELECT count(*)::int FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id LIKE 'dead-%') AS moved`,
        [SESSION],
      );
      peak = Math.max(peak, r.rows[0]?.n ?? 0);
      if (reenqueuedAt === undefined && r.rows[0]?.moved === 0) reenqueuedAt = process.hrtime.bigint();
    }
  })();
  const bodies = Array.from({ length: EXECUTORS }, (_, i) => {
    const data = Buffer.from(
      JSON.stringify(deathNotice({ executorId: deadId(i), applicationName: APP, reason: 'manual', detectedBy: 'bench' })),
    ).toString('base64');
    return JSON.stringify({
      message: { data, attributes: {}, messageId: `burst-${i}`, publishTime: new Date().toISOString() },
      subscription: 'projects/bench/subscriptions/burst',
    });
  });
  const headers = (i: number) => ({
    'content-type': 'application/json',
    'ce-id': `burst-${i}`,
    'ce-specversion': '1.0',
    'ce-type': 'google.cloud.pubsub.topic.v1.messagePublished',
    'ce-source': '//pubsub.googleapis.com/projects/bench/topics/executor-deaths',
    'ce-time': new Date().toISOString(),
  });
  const t0 = process.hrtime.bigint();
  const statuses = await Promise.all(
    bodies.map((body, i) => fetch(target, { method: 'POST', headers: headers(i), body }).then((r) => r.status)),
  );
  const answeredMs = ms(t0);
  // The last re-enqueue committed before its delivery was answered, so the sampler has seen it or will next.
  while (reenqueuedAt === undefined) await new Promise((r) => setTimeout(r, 5));
  sampling = false;
  await sampler;
  const audit = await monitor.query<{ n: number; d: number }>(
    `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM afterlife.recovery_batches, unnest(workflow_ids) AS id`,
  );
  await monitor.end();
  await new Promise<void>((r) => server.close(() => r()));
  await rt.lifecycle.shutdown();
  return {
    t0,
    answeredMs,
    reenqueuedMs: Number(reenqueuedAt - t0) / 1e6,
    statuses,
    peak,
    audited: audit.rows[0]?.n ?? 0,
    distinct: audit.rows[0]?.d ?? 0,
    rows,
  };
}

function report(label: string, r: BurstResult): void {
  const nacked = r.statuses.filter((s) => s >= 300).length;
  console.log(
    `${label}: ${EXECUTORS} notices × ${r.rows / EXECUTORS} PENDING → all answered in ${r.answeredMs.toFixed(0)} ms (${r.statuses.length - nacked} acked, ${nacked} nacked); ` +
      `last row re-enqueued at ${r.reenqueuedMs.toFixed(0)} ms; peak sessions ${r.peak}/3; audit ${r.audited} IDs, ${r.distinct} distinct (expected ${r.rows})`,
  );
  if (nacked > 0 || r.distinct !== r.rows || r.audited !== r.rows) process.exitCode = 1;
}

/** Phase two: K live executors run the re-enqueued rows; time from the first delivery to the last SUCCESS. */
async function withLiveExecutors(template: string, k: number): Promise<void> {
  const name = `afterlife_burst_live_${process.pid}`;
  const url = await cloneDatabase(template, name);
  const rows = EXECUTORS * LIVE_PER;
  const live: AgentExecutor[] = [];
  try {
    for (let i = 0; i < k; i++) {
      live.push(
        await startAgentExecutor({
          databaseUrl: url,
          applicationName: APP,
          applicationVersion: 'v1',
          executorId: `live-${i}`,
          env: { AFTERLIFE_KIT: 'off' },
        }),
      );
    }
    await admin((c) => c.query('CHECKPOINT'));
    const r = await burst(url, rows);
    report(`  with ${k} live executor(s)`, r);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    let firstClaimMs: number | undefined;
    let doneMs: number | undefined;
    const deadline = Date.now() + 600_000;
    while (doneMs === undefined && Date.now() < deadline) {
      const q = await c.query<{ enqueued: number; success: number }>(
        `SELECT count(*) FILTER (WHERE status = 'ENQUEUED')::int AS enqueued, count(*) FILTER (WHERE status = 'SUCCESS' AND workflow_uuid LIKE 'wf-%')::int AS success
           FROM dbos.workflow_status`,
      );
      const { enqueued, success } = q.rows[0] ?? { enqueued: 0, success: 0 };
      if (firstClaimMs === undefined && enqueued < rows) firstClaimMs = ms(r.t0);
      if (success === rows) doneMs = ms(r.t0);
      else await new Promise((res) => setTimeout(res, 100));
    }
    await c.end();
    if (doneMs === undefined) throw new Error(`with ${k} live executor(s): not all ${rows} workflows finished in 10 minutes`);
    console.log(
      `  DBOS dispatch, ${k} live executor(s): all ${rows} SUCCESS at ${(doneMs / 1000).toFixed(1)} s from the first delivery ` +
        `(${((rows / (doneMs - r.reenqueuedMs)) * 1000).toFixed(0)} workflows/s after the re-enqueue)`,
    );
  } finally {
    await Promise.all(live.map((e) => e.stop()));
    await dropDatabase(name);
  }
}

const template = `afterlife_burst_tpl_${process.pid}`;
const url = await createDbosDatabase(template);
const t = process.hrtime.bigint();
await seed(url, PER);
if (withIndex) {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  await applyOptInIndexes(afterlifeDb(pool, 1));
  await pool.end();
}
console.error(
  `seeded ${EXECUTORS} × ${PER} PENDING + ${EXECUTORS * PER} history rows in ${(ms(t) / 1000).toFixed(1)} s${withIndex ? ' (+ opt-in index)' : ''}`,
);
try {
  for (let rep = 1; rep <= 3; rep++) {
    const name = `afterlife_burst_run_${process.pid}`;
    const runUrl = await cloneDatabase(template, name);
    await admin((c) => c.query('CHECKPOINT'));
    report(`run ${rep}`, await burst(runUrl, EXECUTORS * PER));
    await dropDatabase(name);
  }
} finally {
  await dropDatabase(template);
}
if (withDbos) {
  const liveTemplate = `afterlife_burst_ltpl_${process.pid}`;
  const liveUrl = await createDbosDatabase(liveTemplate);
  await seed(liveUrl, LIVE_PER);
  try {
    for (const k of LIVE) await withLiveExecutors(liveTemplate, k);
  } finally {
    await dropDatabase(liveTemplate);
  }
}
process.exit(process.exitCode ?? 0);
