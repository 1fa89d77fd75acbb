/**
 * Question: how soon after its first delivery does a cold executorDeath instance start recovering, with
 * the runtime built at module load (as on Cloud Run, K_SERVICE set) and built lazily on the first request?
 *
 * Each run clones a template holding 100 PENDING workflows of a dead executor, spawns a fresh
 * functions-framework process (`--target=executorDeath`), and POSTs the death notice the moment its port
 * accepts a connection (Cloud Run routes the first request then). "Recovery started" is the audit row's
 * `started_at` (Postgres's clock, the same machine's), "answered" the 204. Modes alternate per run.
 *
 *   npm run build && node dist/bench/coldStart.js [reps=5]
 */
import { connect } from 'node:net';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import pg from 'pg';
import { deathNotice } from '../packages/executor/src/contract/deathNotice.js';
import { ROOT } from '../scripts/stack/functions.js';
import { freePort, spawnManaged } from '../scripts/stack/proc.js';
import { cloneDatabase, createDbosDatabase, dropDatabase, median } from './lib.js';

const reps = Number(process.argv[2] ?? 5);
const APP = 'bench-cold';
const TEMPLATE = 'afterlife_bench_cold_tpl';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

async function seed(url: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
        application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, serialization)
     SELECT 'cold-' || g, 'PENDING', 'agentWorkflow', '', '', 'dead-1', 'v1', $1, NULL, 1, md5(g::text),
            1700000000000 + g, 1700000000000 + g, 'js_superjson'
       FROM generate_series(1, 100) g`,
    [APP],
  );
  await c.end();
}

const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });

interface Result {
  listenMs: number;
  buildMs: number;
  startedMs: number;
  answeredMs: number;
}
type Mode = 'at-load' | 'lazy' | 'at-load, delivered 2 s after listening';

async function once(mode: Mode, run: number): Promise<Result> {
  const name = `afterlife_bench_cold_${run}`;
  const url = await cloneDatabase(TEMPLATE, name);
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    DATABASE_URL: url,
    REDIS_URL,
    REDIS_KEY_PREFIX: `bench-cold-${process.pid}`,
    DBOS_APPLICATION_NAME: APP,
    METADATA_SERVER_DETECTION: 'none',
    PUBSUB_EMULATOR_HOST: '127.0.0.1:1',
    GOOGLE_CLOUD_PROJECT: 'bench',
    ...(mode !== 'lazy' ? { K_SERVICE: 'executorDeath' } : {}),
  };
  const spawned = Date.now();
  let buildMs = Number.NaN;
  const onLine = (line: string) => {
    const m = /"buildMs":(\d+)/.exec(line);
    if (m) buildMs = Number(m[1]);
  };
  const proc = spawnManaged(
    'executorDeath',
    process.execPath,
    [join(ROOT, 'node_modules/@google-cloud/functions-framework/build/src/main.js'), '--target=executorDeath', `--port=${port}`],
    { env, cwd: ROOT, onLine },
  );
  try {
    while (!(await accepts(port))) await new Promise((r) => setTimeout(r, 2));
    const listening = Date.now();
    // The third mode separates the build from the first request: by then the runtime is built.
    if (mode !== 'at-load' && mode !== 'lazy') await new Promise((r) => setTimeout(r, 2_000));
    const notice = deathNotice({ executorId: 'dead-1', applicationName: APP, reason: 'manual', detectedBy: 'bench' });
    const sent = Date.now();
    const res = await fetch(`http://127.0.0.1:${port}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'ce-id': `cold-${run}`,
        'ce-specversion': '1.0',
        'ce-type': 'google.cloud.pubsub.topic.v1.messagePublished',
        'ce-source': 'bench',
      },
      body: JSON.stringify({
        message: { data: Buffer.from(JSON.stringify(notice)).toString('base64'), messageId: `cold-${run}` },
        subscription: 'bench',
      }),
    });
    const answered = Date.now();
    if (res.status !== 204) throw new Error(`delivery answered ${res.status}: ${await res.text()}\n${proc.tail()}`);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const r = await c.query<{ started: string; n: number }>(
      `SELECT (extract(epoch FROM started_at) * 1000)::bigint::text AS started, reenqueued AS n FROM afterlife.recoveries WHERE executor_id = 'dead-1'`,
    );
    await c.end();
    const row = r.rows[0];
    if (!row || row.n !== 100) throw new Error(`expected one recovery of 100 rows, got ${JSON.stringify(r.rows)}`);
    return { listenMs: listening - spawned, buildMs, startedMs: Number(row.started) - sent, answeredMs: answered - sent };
  } finally {
    await proc.stop();
    await dropDatabase(name);
  }
}

async function main(): Promise<void> {
  await seed(await createDbosDatabase(TEMPLATE));
  const modes: Mode[] = ['at-load', 'lazy', 'at-load, delivered 2 s after listening'];
  const results: Record<string, Array<Result>> = Object.fromEntries(modes.map((m) => [m, []]));
  const load = loadavg()[0]?.toFixed(2);
  for (let i = 0; i < reps; i++) {
    for (const [k, mode] of modes.entries()) results[mode]?.push(await once(mode, i * modes.length + k));
  }
  await dropDatabase(TEMPLATE);
  console.log(`load average at start ${load}, now ${loadavg()[0]?.toFixed(2)}; ${reps} runs per mode`);
  console.log(
    '| runtime built | spawn → listening | runtime build | first delivery → recovery started: median (worst) | → 204: median (worst) |',
  );
  console.log('|---|---|---|---|---|');
  for (const [mode, rs] of Object.entries(results)) {
    const col = (k: Exclude<keyof Result, never>) =>
      `${median(rs.map((r) => r[k])).toFixed(0)} ms (${Math.max(...rs.map((r) => r[k])).toFixed(0)})`;
    console.log(`| ${mode} | ${col('listenMs')} | ${col('buildMs')} | ${col('startedMs')} | ${col('answeredMs')} |`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
