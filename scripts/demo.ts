/**
 * `npm run demo`: afterlife keeping agent workflows alive through an executor SIGKILL and a SIGTERM.
 *
 * The local stack comes up (scripts/stack: Postgres, Redis, Pub/Sub, the functions, the reaper's
 * scheduler). Two real DBOS executors of the example agent app (exec-A, exec-B, version v1) start 20
 * agent-like workflows with long steps. exec-A is SIGKILLed mid-step — nothing of it survives: Postgres
 * frees its liveness lock and its heartbeat goes stale, so the reaper declares it dead and re-enqueues its
 * workflows. While exec-A's recovery is under way exec-B gets SIGTERM (a scale-in): its kit drains in-flight
 * steps and publishes a notice for what is left, and a replacement (exec-C) starts, as Cloud Run would.
 * exec-C finishes everything. A timeline is printed until every workflow is SUCCESS.
 *
 * Where a part is missing from the build (no reaper target, an app without the kit), the demo publishes
 * the death notice itself, as `afterlife-plane recover` would, and says so in the timeline.
 *
 *   DEMO_WORKFLOWS (20)  DEMO_STEPS (5)  DEMO_STEP_MS (4000)  DEMO_TIMEOUT_S (240)
 *   HEARTBEAT_TTL_MS (3000 here)  plus everything `npm start` reads
 *   LOG_FORMAT=json (or `-- --json`): the timeline and every log line as JSON lines (docs/logging.md)
 */
import pg from 'pg';
import { logFormat, render } from '../cli/logLines.js';
import { deathNotice, type DeathReason } from '../packages/executor/src/contract/deathNotice.js';
import { deathNoticeAttributes } from '../packages/executor/src/contract/deathNotice.js';
import { makeLogger } from '../packages/executor/src/log.js';
import { type AgentExecutor, startAgentExecutor } from './stack/executor.js';
import { dbosSystemUrl } from './stack/dbosUrl.js';
import { type Stack, startStack } from './stack/index.js';
import { errorMessage } from '../packages/executor/src/errors.js';

const env = { ...process.env };
const num = (key: string, def: number) => {
  const v = Number(env[key] || def);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${key} must be a positive number`);
  return v;
};
const WORKFLOWS = num('DEMO_WORKFLOWS', 20);
const STEPS = num('DEMO_STEPS', 5);
const STEP_MS = num('DEMO_STEP_MS', 4_000);
const TIMEOUT_MS = num('DEMO_TIMEOUT_S', 240) * 1000;
env.HEARTBEAT_TTL_MS ||= '3000';
env.LOCAL_SCHEDULE_MS ||= '2000';
const TTL_MS = Number(env.HEARTBEAT_TTL_MS);
const VERSION = 'v1';

const t0 = Date.now();
const stamp = () => `+${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s`;
// LOG_FORMAT=json or --json: the timeline and every log line of the functions and executors as JSON lines
// (severity, event, function); otherwise the readable timeline below.
const format = process.argv.includes('--json') ? 'json' : logFormat({ env, isTTY: true });
const say = (line: string) =>
  process.stdout.write(
    format === 'json'
      ? `${JSON.stringify({ severity: 'INFO', event: 'demo', function: 'demo', elapsedMs: Date.now() - t0, message: line })}\n`
      : `${stamp()}  ${line}\n`,
  );
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Log events worth a timeline line, from the functions and from the executors' kits. */
const INTERESTING = new Set([
  'executor_dead',
  'executor_draining',
  'executor_drained',
  'death_notice_published',
  'shutdown_forced',
  'orphaned_version',
  'poison_message',
]);

function onLogLine(source: string, line: string): void {
  if (format === 'json') {
    const out = render(line, source, { format, colour: false });
    if (out !== undefined) process.stdout.write(`${out}\n`);
    return;
  }
  if (!line.startsWith('{')) return;
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return;
  }
  const event = parsed.event;
  if (typeof event !== 'string' || !INTERESTING.has(event)) return;
  const detail = ['executorId', 'pending', 'inFlight', 'reason', 'messageId', 'budgetMs']
    .filter((k) => parsed[k] !== undefined && !source.includes(String(parsed[k])))
    .map((k) => `${k}=${String(parsed[k])}`)
    .join(' ');
  say(`${source}: ${String(parsed.message)}${detail ? ` (${detail})` : ''}`);
}

// Ctrl-C can land while the stack or an executor is still starting. Both take this signal and stop what
// they have started; cleanup waits for those starts to settle instead of exiting past them (the stack's
// children run in their own process groups, so they would be orphaned).
const controller = new AbortController();
let starting: Promise<Stack> | undefined;
const executorStarts: Array<Promise<AgentExecutor>> = [];
let sql: pg.Pool | undefined;
let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    interrupted = true;
    process.stderr.write(`\n${sig}: stopping the demo…\n`);
    controller.abort(new Error(`${sig}: interrupted`));
    void cleanup().finally(() => process.exit(130));
  });
}

let cleaning: Promise<void> | undefined;
/** Once, from the signal handler or the end of main, whichever comes first; the other waits for it. */
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    const started = await Promise.allSettled(executorStarts);
    await Promise.allSettled(started.map((r) => (r.status === 'fulfilled' ? r.value.stop() : Promise.resolve())));
    await sql?.end().catch(() => undefined);
    const stack = await starting?.catch(() => undefined);
    await stack?.stop();
  })();
  return cleaning;
}

async function main(): Promise<boolean> {
  say(`starting the local stack (${WORKFLOWS} workflows × ${STEPS} steps × ${STEP_MS} ms; heartbeat TTL ${TTL_MS} ms)`);
  starting = startStack({
    env,
    logger: makeLogger(() => {}),
    signal: controller.signal,
    onFunctionLine: (target, line) => onLogLine(`function ${target}`, line),
  });
  const s = await starting;
  const app = s.applicationName;
  const reaper = s.functions.some((f) => f.target === 'reaper');
  say(
    `stack up: postgres ${s.postgres.kind}, redis ${s.redis.url ?? 'none (degraded)'}, pub/sub ${s.pubsub.kind}, functions ${s.functions.map((f) => f.target).join(', ')}`,
  );
  if (!reaper) say('note: this build has no reaper target — the demo publishes the SIGKILL death notice itself');

  sql = new pg.Pool({ connectionString: s.postgres.url, max: 2, application_name: 'afterlife-demo' });
  sql.on('error', () => undefined);
  const db = sql;

  const [a, b] = [await spawnExecutor(s, 'exec-A'), await spawnExecutor(s, 'exec-B')];
  const ids = Array.from({ length: WORKFLOWS }, (_, i) => `agent-${String(i + 1).padStart(2, '0')}`);
  for (const [i, id] of ids.entries()) await (i % 2 === 0 ? a : b).start(id, { steps: STEPS, stepMs: STEP_MS, tag: 'demo' });
  say(`started ${WORKFLOWS} workflows: ${Math.ceil(WORKFLOWS / 2)} on exec-A, ${Math.floor(WORKFLOWS / 2)} on exec-B`);

  const watcher = watch(db, app, ids);
  try {
    await sigkill(db, a);
    // The scale-in lands right away, while exec-A's recovery is under way (the reaper declares a crash in
    // about a second), so exec-B is mid-work when it drains; the replacement starts meanwhile.
    await sigterm(db, b);
    const viaReaper = reaper && a.kit;
    if (!viaReaper) await publishNotice(s, app, 'exec-A', 'manual');
    await spawnExecutor(s, 'exec-C');
    say('exec-C is the replacement instance (Cloud Run starts one when capacity drops)');
    await drained(b);
    await handedOver(db, s, app, b);
    await recoveredA(db, s, app, viaReaper);

    const done = await until(() => allSuccess(db, ids), TIMEOUT_MS, '', true);
    await watcher.poll();
    if (!done) {
      say(`NOT DONE: not every workflow reached SUCCESS within ${TIMEOUT_MS / 1000} s`);
      return false;
    }
    await report(db, ids);
    return true;
  } finally {
    watcher.stop();
  }
}

/** A real executor of the example app, version VERSION, its kit's events in the timeline. */
async function spawnExecutor(s: Stack, executorId: string): Promise<AgentExecutor> {
  const start = startAgentExecutor({
    databaseUrl: dbosSystemUrl(s.postgres.url),
    applicationName: s.applicationName,
    applicationVersion: VERSION,
    executorId,
    env: { ...s.env, AFTERLIFE_SHUTDOWN_GRACE_MS: env.AFTERLIFE_SHUTDOWN_GRACE_MS || '8000' },
    signal: controller.signal,
  });
  executorStarts.push(start);
  const e = await start;
  e.child.stdout?.on('data', (b: Buffer) =>
    b
      .toString()
      .split('\n')
      .forEach((l) => onLogLine(executorId, l)),
  );
  say(`${executorId} up (DBOS executor, version ${VERSION}${e.kit ? ', afterlife kit attached' : ', WITHOUT the afterlife kit'})`);
  return e;
}

/** Kills exec-A once its workflows are mid-run: some steps checkpointed, one in flight each. */
async function sigkill(db: pg.Pool, a: AgentExecutor): Promise<void> {
  await until(() => checkpointsOf(db, 'exec-A').then((n) => n >= Math.ceil(WORKFLOWS / 2)), TIMEOUT_MS, 'exec-A to checkpoint');
  const pendingA = await pendingOn(db, 'exec-A');
  a.child.kill('SIGKILL');
  await a.exited;
  say(`SIGKILL exec-A — ${pendingA} workflows left PENDING on it; no drain, no notice: only its heartbeat stops`);
}

/** The scale-in: SIGTERM to exec-B while it holds work. */
async function sigterm(db: pg.Pool, b: AgentExecutor): Promise<void> {
  const pendingB = await pendingOn(db, 'exec-B');
  b.child.kill('SIGTERM');
  say(`SIGTERM exec-B (scale-in) with ${pendingB} workflows PENDING on it`);
}

/** Waits for exec-B's drain to end, killing it as Cloud Run would when it overstays. */
async function drained(b: AgentExecutor): Promise<void> {
  const exit = await Promise.race([b.exited, sleep(15_000).then(() => undefined)]);
  if (!exit) {
    say('exec-B still running 15 s after SIGTERM: SIGKILL (Cloud Run would have killed it after 10 s)');
    b.child.kill('SIGKILL');
    await b.exited;
  } else {
    say(`exec-B exited (${exit.code ?? exit.signal})${b.kit ? '' : ' at once: no kit, so no drain'}`);
  }
}

/** What exec-B did not finish reaches recovery: through its kit's notice, or one published here. */
async function handedOver(db: pg.Pool, s: Stack, app: string, b: AgentExecutor): Promise<void> {
  const leftB = await pendingOn(db, 'exec-B');
  if (leftB > 0) {
    const byKit = b.kit && (await until(() => recoveredOnce(db, app, 'exec-B'), 10_000, '', true));
    if (!byKit) {
      say(`${leftB} workflows still PENDING on exec-B with no notice from it: publishing one as \`afterlife-plane recover\` would`);
      await publishNotice(s, app, 'exec-B', 'sigterm');
    }
  } else if (await recoveredOnce(db, app, 'exec-B')) {
    // Its kit's notice arrived before it exited: recovery already moved what it could not finish.
    say("exec-B's kit handed what it could not finish to recovery before exiting: nothing left on it");
  } else {
    say('exec-B finished everything it held before exiting: nothing to recover');
  }
}

/** exec-A's recovery, by the reaper when it can (a notice published here past a bound), else by the notice. */
async function recoveredA(db: pg.Pool, s: Stack, app: string, viaReaper: boolean): Promise<void> {
  if (viaReaper) {
    const bound = 3 * TTL_MS + 15_000;
    if (!(await until(() => recoveredOnce(db, app, 'exec-A'), bound, '', true))) {
      say(`the reaper did not recover exec-A within ${bound / 1000} s: publishing the notice as \`afterlife-plane recover\` would`);
      await publishNotice(s, app, 'exec-A', 'manual');
    }
  }
  await until(() => recoveredOnce(db, app, 'exec-A'), TIMEOUT_MS, 'the recovery of exec-A');
}

/** Prints status changes, registry state changes and finished recoveries as they happen. */
function watch(db: pg.Pool, app: string, ids: string[]) {
  let lastCounts = '';
  const seenStates = new Map<string, string>();
  const seenRecoveries = new Set<number>();
  let busy = false;
  const poll = async () => {
    if (busy) return;
    busy = true;
    try {
      const counts = await db.query<{ status: string; executor_id: string | null; n: number }>(
        `SELECT status, executor_id, count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) GROUP BY 1, 2 ORDER BY 1, 2`,
        [ids],
      );
      const byStatus = new Map<string, number>();
      const pendingOn: string[] = [];
      for (const r of counts.rows) {
        byStatus.set(r.status, (byStatus.get(r.status) ?? 0) + r.n);
        if (r.status === 'PENDING') pendingOn.push(`${r.executor_id}:${r.n}`);
      }
      const line = `workflows ${[...byStatus].map(([k, v]) => `${v} ${k}`).join(' · ')}${pendingOn.length ? `   (PENDING on ${pendingOn.join(' ')})` : ''}`;
      if (line !== lastCounts) {
        lastCounts = line;
        say(`  ${line}`);
      }
      const states = await db.query<{ executor_id: string; state: string; reason: string | null; detected_by: string | null }>(
        `SELECT executor_id, state, reason, detected_by FROM afterlife.executors WHERE application_name = $1`,
        [app],
      );
      for (const r of states.rows) {
        if (seenStates.get(r.executor_id) === r.state) continue;
        const first = !seenStates.has(r.executor_id);
        seenStates.set(r.executor_id, r.state);
        if (first && r.state === 'alive') continue;
        say(`registry: ${r.executor_id} → ${r.state}${r.reason ? ` (${r.reason}${r.detected_by ? `, by ${r.detected_by}` : ''})` : ''}`);
      }
      const recs = await db.query<{
        id: number;
        executor_id: string;
        reason: string;
        detected_by: string;
        lock_mode: string;
        reenqueued: number;
        ms: number;
        outcome: string;
      }>(
        `SELECT id::int, executor_id, reason, detected_by, lock_mode, reenqueued, outcome,
                (EXTRACT(EPOCH FROM finished_at - started_at) * 1000)::int AS ms
           FROM afterlife.recoveries WHERE application_name = $1 AND finished_at IS NOT NULL ORDER BY id`,
        [app],
      );
      for (const r of recs.rows) {
        if (seenRecoveries.has(r.id)) continue;
        seenRecoveries.add(r.id);
        say(
          `RECOVERED ${r.executor_id}: recovery #${r.id} re-enqueued ${r.reenqueued} workflows in ${r.ms} ms (${r.outcome}; reason ${r.reason}, detected by ${r.detected_by}, lock ${r.lock_mode})`,
        );
      }
    } catch {
      /* the next poll tries again */
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void poll(), 500);
  return { poll, stop: () => clearInterval(timer) };
}

async function report(db: pg.Pool, ids: string[]): Promise<void> {
  const finishers = await db.query<{ executor_id: string; n: number }>(
    `SELECT executor_id, count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) GROUP BY 1 ORDER BY 1`,
    [ids],
  );
  const reruns = await db.query<{ twice: number; completed_again: number }>(
    `WITH starts AS (SELECT workflow_id, step, count(*) AS n FROM public.step_runs WHERE phase = 'start' AND workflow_id = ANY($1) GROUP BY 1, 2)
     SELECT (SELECT count(*)::int FROM starts WHERE n > 1) AS twice,
            -- A step body runs again legitimately when it was killed before DBOS checkpointed it; one that
            -- starts after its checkpoint was written would be a real double execution. (Each agent step is
            -- the workflow's only DBOS call, so function_id = step.)
            (SELECT count(*)::int FROM public.step_runs s JOIN dbos.operation_outputs o
                ON o.workflow_uuid = s.workflow_id AND o.function_id = s.step
              WHERE s.phase = 'start' AND s.workflow_id = ANY($1)
                AND s.at > to_timestamp(o.completed_at_epoch_ms / 1000.0)) AS completed_again`,
    [ids],
  );
  const r = reruns.rows[0];
  say(`ALL ${ids.length} WORKFLOWS SUCCESS — finished by ${finishers.rows.map((x) => `${x.executor_id}: ${x.n}`).join(', ')}`);
  say(
    `step bodies that ran twice (in flight at a kill, before their checkpoint — DBOS runs steps at least once): ${r?.twice ?? 0}; ` +
      `checkpointed steps that ran again: ${r?.completed_again ?? 0}`,
  );
}

async function publishNotice(s: Stack, app: string, executorId: string, reason: DeathReason): Promise<void> {
  const notice = deathNotice({ executorId, applicationName: app, reason, detectedBy: 'afterlife-demo' });
  const id = await s.publish(s.deathTopic, notice, deathNoticeAttributes(notice), executorId);
  say(`published a death notice for ${executorId} (reason ${reason}, message ${id})`);
}

const checkpointsOf = async (db: pg.Pool, executorId: string) =>
  (
    await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM dbos.operation_outputs o JOIN dbos.workflow_status w USING (workflow_uuid) WHERE w.executor_id = $1`,
      [executorId],
    )
  ).rows[0]?.n ?? 0;
const pendingOn = async (db: pg.Pool, executorId: string) =>
  (
    await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id = $1`, [
      executorId,
    ])
  ).rows[0]?.n ?? 0;
const recoveredOnce = async (db: pg.Pool, app: string, executorId: string) =>
  ((
    await db.query(`SELECT 1 FROM afterlife.recoveries WHERE application_name = $1 AND executor_id = $2 AND outcome IS NOT NULL`, [
      app,
      executorId,
    ])
  ).rowCount ?? 0) > 0;
const allSuccess = async (db: pg.Pool, ids: string[]) =>
  (
    await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) AND status = 'SUCCESS'`,
      [ids],
    )
  ).rows[0]?.n === ids.length;

/** Polls until the probe holds. A bound passing is an error, unless `soft` (then false). */
async function until(probe: () => Promise<boolean>, timeoutMs: number, what: string, soft = false): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (interrupted) throw new Error('interrupted');
    if (await probe().catch(() => false)) return true;
    if (Date.now() > deadline) {
      if (soft) return false;
      throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    }
    await sleep(200);
  }
}

let ok = false;
try {
  ok = await main();
} catch (err) {
  if (!interrupted) say(`demo failed: ${errorMessage(err)}`);
}
await cleanup();
process.exit(interrupted ? 130 : ok ? 0 : 1);
