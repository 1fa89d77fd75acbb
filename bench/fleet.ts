/**
 * bench/fleet — a fleet, not a demo: N executors watched by one reaper, what it costs, how it grows (issue 31).
 *
 *   npm run bench:fleet -- --executors 1000 [--kills 10] [--minutes 10] [--workflows 10] [--settle-s 16] [--start-window-s 60] [--json]
 *
 * On a Postgres and a Redis of its own (a private embedded PostgreSQL 15 with max_connections raised to fit
 * the fleet and pg_stat_statements loaded; a redis-server on a free port): never the shared ones.
 *   - N − 2 simulated executors (bench/fleetSim.ts, a child process per 100): the kit's own protocol code —
 *     each its registry row, its liveness session holding the lock with the lease, its heartbeat every 250 ms
 *     — without DBOS or the drain poll, each started at a random moment of `--start-window-s` (a deploy);
 *   - 2 real DBOS executors with the kit (the example agent app): a survivor that stays up, and a victim per
 *     kill that starts `--workflows` agent workflows (2 steps of 3 s) and is SIGKILLed inside its first step;
 *   - the reaper (bench/fleetReaper.ts, one child process) as Terraform deploys it: Scheduler every 60 s,
 *     FUNCTION_TIMEOUT_S 150, standbys waiting on the lease, every other setting at its default (tick 250 ms,
 *     lease 3 s, recovery inline, DB_POOL_MAX 3), running as a Postgres role of its own so
 *     pg_stat_statements tells its statements from the fleet's.
 * The reaper is up before the fleet starts, so a half-started fleet is judged as it starts (a death then is a
 * false death like any other). After the fleet holds its locks and Redis has kept its keys for a TTL (16 s), the watch runs `--minutes`
 * (the kills inside it): every tick's duration and its statements' time, SIGKILL → first step of the
 * victim's work on the survivor (database clock), false deaths (anything declared dead that was not
 * killed), Postgres connections and backends' memory, Redis commands per second and memory, and the CPU of
 * the reaper, the simulated fleet, Postgres and Redis. `--json` prints one line at the end.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { z } from 'zod';
import { loadLine, parseFlags } from './args.js';
import { type AgentExecutor, startAgentExecutor } from '../scripts/stack/executor.js';
import { startPrivatePostgres } from '../test/helpers/postgresServer.js';
import { startPrivateRedis } from '../test/helpers/redisServer.js';
import type { TickMessage } from './fleetReaper.js';
import { SWEEP_PASS_NAMES, type SweepPassName } from '../shared/reaper/types.js';
import {
  cpuBetween,
  cpuSnapshot,
  quantile,
  type PgServerReading,
  readPgServer,
  readRedis,
  redisCommandCalls,
  statementsOf,
  type StatementShare,
  topStatementsOf,
  type StatementTotals,
} from './fleetStats.js';
import { until } from './killBench.js';

const Args = z
  .object({
    executors: z.coerce.number().int().min(3).max(5_000),
    kills: z.coerce.number().int().min(0).max(100).default(10),
    minutes: z.coerce.number().positive().max(120).default(10),
    workflows: z.coerce.number().int().min(1).max(100).default(10),
    /** Seconds between the fleet's start and the watch: Redis keeps its keys for a TTL first (a CI smoke uses 0). */
    'settle-s': z.coerce.number().int().min(0).max(600).default(16),
    /** The simulated kits start at random moments of this window, as a deploy starts a fleet (0: all at once). */
    'start-window-s': z.coerce.number().int().min(0).max(600).default(60),
    json: z.boolean().default(false),
  })
  .strict();

const args = parseFlags('bench:fleet', Args, process.argv.slice(2));
const say = (line: string) => (args.json ? process.stderr : process.stdout).write(`${line}\n`);
const load = loadLine;
const REAL_EXECUTORS = 2;
const STEP_MS = 3_000;
const REAPER_ROLE = 'fleet_reaper';
const SIM_PER_PROCESS = 100;
/** Every line the children log, whole (the report quotes the last few). */
const LOG_DIR = mkdtempSync(join(tmpdir(), 'afterlife-fleet-'));
const here = (f: string) => fileURLToPath(new URL(f, import.meta.url));

interface Child {
  proc: ChildProcess;
  /** What the child logged (stdout and stderr), first 2,000 lines. */
  stderr: string[];
  exited: Promise<void>;
  next(event: string, timeoutMs: number): Promise<Record<string, unknown>>;
}

function forkChild(
  script: string,
  env: Record<string, string>,
  onMessage?: (m: Record<string, unknown>) => void,
  name = basename(script, '.js'),
): Child {
  const proc = fork(here(script), [], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  const stderr: string[] = [];
  // The children log WARNING and above (JSON on stdout, as the functions do): kept for the report.
  const log = createWriteStream(join(LOG_DIR, `${name}.log`));
  const keep = (b: Buffer) => {
    log.write(b);
    for (const l of b.toString().split('\n')) if (l.trim() && stderr.length < 2_000) stderr.push(l);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  if (onMessage) proc.on('message', (m) => onMessage(m as Record<string, unknown>));
  return {
    proc,
    stderr,
    exited,
    next: (event, timeoutMs) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${script}: no '${event}' in ${timeoutMs} ms\n${stderr.slice(-20).join('\n')}`)),
          timeoutMs,
        );
        const on = (m: unknown) => {
          const msg = m as Record<string, unknown>;
          if (msg.event !== event) return;
          clearTimeout(timer);
          proc.off('message', on);
          resolve(msg);
        };
        proc.on('message', on);
        void exited.then(() => {
          clearTimeout(timer);
          reject(new Error(`${script} exited before '${event}':\n${stderr.slice(-20).join('\n')}`));
        });
      }),
  };
}

async function stopChild(c: Child | undefined, timeoutMs = 20_000): Promise<Record<string, unknown> | undefined> {
  if (!c || c.proc.exitCode !== null || c.proc.signalCode !== null) return undefined;
  const report = c.next('report', timeoutMs).catch(() => undefined);
  c.proc.send({ cmd: 'stop' });
  const timer = setTimeout(() => c.proc.kill('SIGKILL'), timeoutMs);
  await c.exited;
  clearTimeout(timer);
  return report;
}

interface Kill {
  victim: string;
  firstStepMs: number;
  declaredMs: number;
}

async function killOnce(k: number, o: { url: string; app: string; env: Record<string, string>; sql: pg.Pool }): Promise<Kill> {
  const victimId = `victim-${k}`;
  const victim = await startReal(victimId, o);
  try {
    const ids = Array.from({ length: args.workflows }, (_, i) => `${victimId}-wf-${i}`);
    for (const id of ids) await victim.start(id, { steps: 2, stepMs: STEP_MS });
    await until(`${args.workflows} steps started on ${victimId}`, 60_000, async () => {
      const r = await o.sql.query<{ n: number }>(
        `SELECT count(DISTINCT workflow_id)::int AS n FROM public.step_runs WHERE executor_id = $1 AND phase = 'start'`,
        [victimId],
      );
      return r.rows[0]?.n === args.workflows;
    });
    // A random moment against the beat and the tick grids, inside the first step.
    await new Promise((r) => setTimeout(r, 200 + Math.random() * 1_500));
    const killedAt = Date.now();
    victim.kill('SIGKILL');
    await victim.exited;
    const first = await until(`the survivor starts ${victimId}'s work`, 90_000, async () => {
      const r = await o.sql.query<{ t: Date | null }>(
        `SELECT min(at) AS t FROM public.step_runs WHERE executor_id = 'survivor' AND phase = 'start' AND workflow_id = ANY($1)`,
        [ids],
      );
      return r.rows[0]?.t?.getTime();
    });
    const declared = await o.sql.query<{ t: Date | null }>(`SELECT min(started_at) AS t FROM afterlife.recoveries WHERE executor_id = $1`, [
      victimId,
    ]);
    return { victim: victimId, firstStepMs: first - killedAt, declaredMs: (declared.rows[0]?.t?.getTime() ?? NaN) - killedAt };
  } finally {
    await victim.stop();
  }
}

function startReal(executorId: string, o: { url: string; app: string; env: Record<string, string> }): Promise<AgentExecutor> {
  return startAgentExecutor({
    databaseUrl: o.url,
    applicationName: o.app,
    applicationVersion: 'v1',
    executorId,
    env: o.env,
    readyTimeoutMs: 300_000,
  });
}

interface Watch {
  startedAt: number;
  cpu: Map<number, number>;
  pgMax: PgServerReading;
}

interface Result {
  executors: number;
  tickP50Ms: number;
  tickP99Ms: number;
  tickMaxMs: number;
  /** The ticks that declared no death (a declaring tick carries its inline recovery): p99 and max. */
  quietTickP99Ms: number;
  quietTickMaxMs: number;
  ticks: number;
  /** The first tick of each invocation (it reads the whole fleet): max, and how many. */
  firstTickMaxMs: number | null;
  firstTicks: number;
  /** Per sweep pass, over the ticks it ran in: how often, p99 and max ms; `rest` is the tick minus its passes. */
  passFigures: Record<SweepPassName | 'dead' | 'rest', { runs: number; p99Ms: number; maxMs: number }>;
  dbMsPerTickP50: number;
  dbMsPerTickP99: number;
  queriesPerTick: number;
  detectionP50Ms: number | null;
  detectionP95Ms: number | null;
  /** SIGKILL → the death declared (the recovery's start), p95: what the death rule takes, before the claim. */
  declaredP95Ms: number | null;
  kills: number;
  /** Kills whose work did not start elsewhere in time (or whose victim never started), with why. */
  missedKills: string[];
  falseDeaths: number;
  falseDeathIds: string[];
  pgConnections: number;
  pgClientBackends: number;
  pgBackendsPssMb: number;
  pgPrivateMbPerBackend: number;
  redisOpsPerSec: number;
  redisUsedMemoryMb: number;
  redisRssMb: number;
  cpu: { reaper: number; fleetSim: number; postgres: number; redis: number };
  reaperStatementsPerTick: { calls: number; rows: number; blocks: number; execMs: number; walBytes: number };
  /** The reaper's statements that took the most server time, per tick (what grows with the fleet). */
  reaperTopStatements: Array<{
    query: string;
    callsPerTick: number;
    rowsPerTick: number;
    blocksPerTick: number;
    execMsPerTick: number;
    walBytesPerTick: number;
  }>;
  fleetQueriesPerSec: number;
  redisCommands: Record<string, number>;
  simStartMs: number;
  /** Each simulated kit's start → its lock held: the fleet's start as the kits saw it. */
  startWindowS: number;
  attachP50Ms: number | null;
  attachP95Ms: number | null;
  attachMaxMs: number | null;
  /** Kits that took longer than 60 s to hold their lock, or never did. */
  slowAttaches: number;
  /** Per executor: Postgres CPU (ms a second, the whole server over the executors) and the fleet's statements a second. */
  pgCpuMsPerExecutorPerS: number;
  fleetStatementsPerExecutorPerS: number;
  watchedMinutes: number;
  load: { before: string; after: string };
}

async function main(): Promise<Result> {
  const loadBefore = load();
  const app = `fleet-${randomBytes(3).toString('hex')}`;
  const prefix = `fleet${process.pid}`;
  const sims = Math.max(0, args.executors - REAL_EXECUTORS);
  const pgServer = await startPrivatePostgres({
    settings: { max_connections: String(args.executors + 300), shared_preload_libraries: 'pg_stat_statements' },
  });
  const redisServer = await startPrivateRedis();
  const admin = new pg.Client({ connectionString: pgServer.url });
  const redis = new Redis(redisServer.url);
  const sql = new pg.Pool({ connectionString: pgServer.url, max: 2 });
  // An idle client ended by the server at teardown must not take the report down with it (pg-pool emits 'error').
  sql.on('error', () => undefined);
  const simChildren: Child[] = [];
  let reaper: Child | undefined;
  const real: AgentExecutor[] = [];
  const ticks: TickMessage[] = [];
  let watching = false;
  try {
    await admin.connect();
    await admin.query(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`);
    // Superuser: the reaper reads pg_stat_activity and pg_locks as Terraform's grants let it (pg_read_all_stats).
    await admin.query(`CREATE ROLE ${REAPER_ROLE} LOGIN SUPERUSER`);
    await admin.query(
      `CREATE TABLE IF NOT EXISTS public.step_runs (workflow_id text NOT NULL, step integer NOT NULL, executor_id text NOT NULL, phase text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
    );
    const common = { DBOS_APPLICATION_NAME: app, REDIS_URL: redisServer.url, REDIS_KEY_PREFIX: prefix, METADATA_SERVER_DETECTION: 'none' };
    say(`fleet: ${args.executors} executors (${sims} simulated + ${REAL_EXECUTORS} real), load ${loadBefore}; postgres :${pgServer.port}`);
    // The reaper watches the fleet start: a half-started fleet must never read as a death (its declarations
    // land in the registry and the recoveries, which the false-death count reads whenever they were made).
    const reaperUrl = new URL(pgServer.url);
    reaperUrl.username = REAPER_ROLE;
    reaper = forkChild(
      './fleetReaper.js',
      { ...common, DATABASE_URL: reaperUrl.toString(), FUNCTION_TIMEOUT_S: '150', LOG_LEVEL: 'WARNING' },
      (m) => {
        if (m.event === 'tick' && watching) ticks.push(m as unknown as TickMessage);
      },
    );
    await reaper.next('ready', 60_000);
    // A process per SIM_PER_PROCESS executors: a real fleet is one process per executor, and one event loop
    // for a thousand kits starves on a shared machine (their sessions then end by the lease: false deaths).
    const t0 = Date.now();
    for (let off = 0; off < sims; off += SIM_PER_PROCESS) {
      const n = Math.min(SIM_PER_PROCESS, sims - off);
      simChildren.push(
        forkChild(
          './fleetSim.js',
          {
            ...common,
            DATABASE_URL: pgServer.url,
            FLEET_EXECUTORS: String(n),
            FLEET_OFFSET: String(off),
            FLEET_START_WINDOW_MS: String(args['start-window-s'] * 1000),
          },
          undefined,
          `fleetSim-${off}`,
        ),
      );
    }
    const readies = await Promise.all(simChildren.map((c) => c.next('ready', 15 * 60_000)));
    const simReady = { held: readies.reduce((a, r) => a + Number(r.held), 0), startMs: Date.now() - t0 };
    const attachMs = readies
      .flatMap((r) => (Array.isArray(r.attachMs) ? (r.attachMs as Array<number | null>) : []))
      .map((a) => a ?? Infinity);
    const slowAttaches = readies.reduce((a, r) => a + Number(r.slowAttaches ?? 0), 0);
    const attach = {
      p50: finiteOrNull(attachMs.length ? quantile(attachMs, 0.5) : null),
      p95: finiteOrNull(attachMs.length ? quantile(attachMs, 0.95) : null),
      max: finiteOrNull(attachMs.length ? Math.max(...attachMs) : null),
      slow: slowAttaches,
    };
    say(
      `fleet: ${simReady.held}/${sims} simulated executors (${simChildren.length} processes) hold their lock after ${simReady.startMs} ms (started over ${args['start-window-s']} s; each kit's start → lock: p50 ${attach.p50} ms, p95 ${attach.p95} ms, max ${attach.max} ms, ${attach.slow} over 60 s), load ${load()}`,
    );
    const kitEnv = { ...common, AFTERLIFE_KIT: 'on', DBOS_APP_NAME: app, AFTERLIFE_PUBLISH: 'none' };
    const o = { url: pgServer.url, app, env: kitEnv, sql };
    real.push(await startReal('survivor', o));
    // Steady state: Redis has kept its keys for a TTL and Postgres has been up past the reaper's settle time.
    await new Promise((r) => setTimeout(r, args['settle-s'] * 1000));
    const simPids = () => simChildren.map((c) => c.proc.pid ?? 0);
    const pids = () => [reaper?.proc.pid ?? 0, ...simPids()];
    const pg0 = await readPgServer(admin);
    const r0 = await readRedis(redis);
    await admin.query(`SELECT pg_stat_statements_reset()`);
    await redis.config('RESETSTAT');
    const w: Watch = { startedAt: Date.now(), cpu: cpuSnapshot([...pids(), ...pg0.pids, r0.pid]), pgMax: pg0 };
    watching = true;
    say(`fleet: watching for ${args.minutes} min (${args.kills} kills inside), load ${load()}`);
    const progress = setInterval(() => {
      const last = ticks[ticks.length - 1];
      const recent = ticks.slice(-120).map((t) => t.ms);
      say(
        `  … ${ticks.length} ticks; last: ${last?.candidates ?? '-'} candidates, ${last?.alive ?? '-'} alive, ${last?.ms ?? '-'} ms; recent p99 ${quantile(recent, 0.99)} ms; load ${load()}`,
      );
    }, 30_000);
    const sampler = setInterval(() => {
      void readPgServer(admin)
        .then((p) => {
          if (p.connections > w.pgMax.connections) w.pgMax = p;
        })
        .catch(() => undefined);
    }, 5_000);
    const kills: Kill[] = [];
    const missed: string[] = [];
    try {
      for (let k = 0; k < args.kills; k++) {
        try {
          const kill = await killOnce(k, o);
          kills.push(kill);
          say(`kill #${k + 1}: declared ${kill.declaredMs} ms, first step elsewhere ${kill.firstStepMs} ms (load ${load()})`);
        } catch (err) {
          // A kill whose work did not run elsewhere in time (or whose victim never got going) is a result, not
          // the end of the run: counted as missed, and the p95 is then over Infinity (reported as null).
          missed.push(`victim-${k}: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
          say(`kill #${k + 1}: MISSED — ${missed[missed.length - 1]} (load ${load()})`);
        }
      }
      const end = w.startedAt + args.minutes * 60_000;
      while (Date.now() < end) await new Promise((r) => setTimeout(r, Math.min(5_000, Math.max(0, end - Date.now()))));
    } finally {
      clearInterval(sampler);
      clearInterval(progress);
    }
    watching = false;
    const elapsedS = (Date.now() - w.startedAt) / 1000;
    const pg1 = await readPgServer(admin);
    const r1 = await readRedis(redis);
    const cpu1 = cpuSnapshot([...pids(), ...pg1.pids, r1.pid]);
    const cpuOf = (ps: number[]) => cpuBetween(pick(w.cpu, ps), pick(cpu1, ps));
    const reaperStmts = await statementsOf(admin, REAPER_ROLE);
    const reaperTop = await topStatementsOf(admin, REAPER_ROLE, 8);
    const fleetStmts = await statementsOf(admin, 'postgres');
    const commands = await redisCommandCalls(redis);
    const falseDeathIds = await falseDeaths(sql, new Set(kills.map((k) => k.victim)), ticks);
    const pgPeak = pg1.connections >= w.pgMax.connections ? pg1 : w.pgMax;
    return {
      executors: args.executors,
      ...tickFigures(ticks, reaperStmts, reaperTop),
      detectionP50Ms: finiteOrNull(detectionQuantile(kills, missed.length, 0.5)),
      detectionP95Ms: finiteOrNull(detectionQuantile(kills, missed.length, 0.95)),
      declaredP95Ms: kills.length
        ? quantile(
            kills.map((k) => k.declaredMs),
            0.95,
          )
        : null,
      kills: kills.length + missed.length,
      missedKills: missed,
      falseDeaths: falseDeathIds.length,
      falseDeathIds,
      pgConnections: pgPeak.connections,
      pgClientBackends: pgPeak.clientBackends,
      pgBackendsPssMb: pg1.pssMb,
      pgPrivateMbPerBackend: pg1.privateMbPerBackend,
      // RESETSTAT zeroed the counter at the start of the watch.
      redisOpsPerSec: Math.round(r1.commands / elapsedS),
      redisUsedMemoryMb: r1.usedMemoryMb,
      redisRssMb: r1.rssMb,
      cpu: {
        reaper: round2(cpuOf([reaper.proc.pid ?? 0]) / elapsedS),
        fleetSim: round2(cpuOf(simPids()) / elapsedS),
        postgres: round2(cpuOf(pg1.pids) / elapsedS),
        redis: round2(cpuOf([r1.pid]) / elapsedS),
      },
      fleetQueriesPerSec: Math.round(fleetStmts.calls / elapsedS),
      redisCommands: Object.fromEntries(Object.entries(commands).map(([k, v]) => [k, Math.round(v / elapsedS)])),
      simStartMs: Number(simReady.startMs),
      startWindowS: args['start-window-s'],
      attachP50Ms: attach.p50,
      attachP95Ms: attach.p95,
      attachMaxMs: attach.max,
      slowAttaches: attach.slow,
      pgCpuMsPerExecutorPerS: round3((cpuOf(pg1.pids) / elapsedS / args.executors) * 1000),
      fleetStatementsPerExecutorPerS: round3(fleetStmts.calls / elapsedS / args.executors),
      watchedMinutes: Math.round((elapsedS / 60) * 100) / 100,
      load: { before: loadBefore, after: load() },
    };
  } finally {
    await stopChild(reaper);
    const simReports = await Promise.all(simChildren.map((c) => stopChild(c, 60_000)));
    if (!args.json) {
      const sum = (k: string) =>
        simReports.reduce((a, r) => a + (Array.isArray(r?.[k]) ? (r[k] as unknown[]).length : Number(r?.[k] ?? 0)), 0);
      say(
        `fleet-sim: ${sum('heldAtEnd')} locks held at the end, ${sum('heartbeatsLost')} heartbeats lost for a TTL, ${sum('fenced')} fenced`,
      );
    }
    await Promise.all(real.map((e) => e.stop()));
    reportWarnings('reaper', reaper);
    simChildren.forEach((c, i) => reportWarnings(`fleet-sim ${i}`, c));
    await sql.end();
    await admin.end().catch(() => undefined);
    redis.disconnect();
    await redisServer.stop();
    await pgServer.stop();
  }
}

/** A quantile of kill → first step elsewhere, a missed kill counting as Infinity; null without kills. */
function detectionQuantile(kills: Kill[], missed: number, q: number): number | null {
  if (kills.length + missed === 0) return null;
  return quantile([...kills.map((k) => k.firstStepMs), ...Array<number>(missed).fill(Infinity)], q);
}

function finiteOrNull(x: number | null): number | null {
  return x !== null && Number.isFinite(x) ? x : null;
}

function pick(m: Map<number, number>, pids: number[]): Map<number, number> {
  return new Map(pids.flatMap((p) => (m.has(p) ? [[p, m.get(p) as number] as const] : [])));
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

/** Tick time (client side, the whole tick), its statements' time, and per tick what the reaper's role ran. */
function tickFigures(ticks: TickMessage[], s: StatementTotals, top: StatementShare[]) {
  const n = Math.max(1, ticks.length);
  const ms = ticks.map((t) => t.ms);
  const db = ticks.map((t) => t.dbMs);
  return {
    tickP50Ms: quantile(ms, 0.5),
    tickP99Ms: quantile(ms, 0.99),
    tickMaxMs: Math.max(...ms),
    ...quietFigures(ticks),
    ticks: ticks.length,
    firstTickMaxMs: ticks.some((t) => t.first) ? Math.max(...ticks.filter((t) => t.first).map((t) => t.ms)) : null,
    firstTicks: ticks.filter((t) => t.first).length,
    passFigures: passFigures(ticks),
    dbMsPerTickP50: quantile(db, 0.5),
    dbMsPerTickP99: quantile(db, 0.99),
    queriesPerTick: round2(ticks.reduce((a, t) => a + t.queries, 0) / n),
    reaperStatementsPerTick: {
      calls: round2(s.calls / n),
      rows: round2(s.rows / n),
      blocks: round2(s.blocks / n),
      execMs: round2(s.execMs / n),
      walBytes: round2(s.walBytes / n),
    },
    reaperTopStatements: top.map((t) => ({
      query: t.query.slice(0, 160),
      callsPerTick: round2(t.calls / n),
      rowsPerTick: round2(t.rows / n),
      blocksPerTick: round2(t.blocks / n),
      execMsPerTick: round2(t.execMs / n),
      walBytesPerTick: round2(t.walBytes / n),
    })),
  };
}

function quietFigures(ticks: TickMessage[]): { quietTickP99Ms: number; quietTickMaxMs: number } {
  const quiet = ticks.filter((t) => t.declared.length === 0).map((t) => t.ms);
  return { quietTickP99Ms: quiet.length ? quantile(quiet, 0.99) : 0, quietTickMaxMs: quiet.length ? Math.max(...quiet) : 0 };
}

function passFigures(ticks: TickMessage[]): Result['passFigures'] {
  const of = (xs: number[]) => ({ runs: xs.length, p99Ms: xs.length ? quantile(xs, 0.99) : 0, maxMs: xs.length ? Math.max(...xs) : 0 });
  const sweep = Object.fromEntries(SWEEP_PASS_NAMES.map((p) => [p, of(ticks.map((t) => t.passMs[p]).filter((ms) => ms > 0))]));
  const rest = ticks.map((t) => round2(t.ms - t.deadMs - SWEEP_PASS_NAMES.reduce((a, p) => a + t.passMs[p], 0)));
  return { ...sweep, dead: of(ticks.map((t) => t.deadMs)), rest: of(rest) } as Result['passFigures'];
}

/** Declared dead without having been killed: in a tick's declarations, the registry, or a recovery. */
async function falseDeaths(sql: pg.Pool, killed: Set<string>, ticks: TickMessage[]): Promise<string[]> {
  const ids = new Set(ticks.flatMap((t) => t.declared));
  const r = await sql.query<{ id: string }>(
    `SELECT executor_id AS id FROM afterlife.executors WHERE state = 'dead' UNION SELECT executor_id FROM afterlife.recoveries`,
  );
  for (const row of r.rows) ids.add(row.id);
  return [...ids].filter((id) => !killed.has(id)).sort();
}

function reportWarnings(name: string, c: Child | undefined): void {
  if (!c || c.stderr.length === 0) return;
  say(`${name}: ${c.stderr.length} line(s) logged (${LOG_DIR}), the last: ${c.stderr.slice(-3).join(' | ').slice(0, 800)}`);
}

function print(r: Result): void {
  if (args.json) {
    console.log(JSON.stringify(r));
    return;
  }
  const s = (ms: number | null) => (ms === null ? 'n/a' : `${(ms / 1000).toFixed(2)} s`);
  say(`\nexecutors ${r.executors}, watched ${r.watchedMinutes} min, load before ${r.load.before}, after ${r.load.after}`);
  say(`reaper tick: p50 ${r.tickP50Ms} ms, p99 ${r.tickP99Ms} ms, max ${r.tickMaxMs} ms over ${r.ticks} ticks`);
  say(`  ticks that declared no death: p99 ${r.quietTickP99Ms} ms, max ${r.quietTickMaxMs} ms`);
  say(`  first tick of an invocation (reads the whole fleet): max ${r.firstTickMaxMs ?? '-'} ms over ${r.firstTicks}`);
  say(
    `  per pass (runs, p99, max ms): ${Object.entries(r.passFigures)
      .map(([p, f]) => `${p} ${f.runs}/${f.p99Ms}/${f.maxMs}`)
      .join(', ')}`,
  );
  say(`  database time per tick: p50 ${r.dbMsPerTickP50} ms, p99 ${r.dbMsPerTickP99} ms; ${r.queriesPerTick} statements a tick`);
  say(`  reaper's statements per tick (server): ${JSON.stringify(r.reaperStatementsPerTick)}`);
  for (const t of r.reaperTopStatements)
    say(
      `    ${t.callsPerTick} calls, ${t.rowsPerTick} rows, ${t.blocksPerTick} pages, ${t.execMsPerTick} ms, ${t.walBytesPerTick} B WAL a tick: ${t.query}`,
    );
  say(
    `SIGKILL → first step elsewhere: p50 ${s(r.detectionP50Ms)}, p95 ${s(r.detectionP95Ms)} over ${r.kills} kills (declared p95 ${s(r.declaredP95Ms)})`,
  );
  if (r.missedKills.length) say(`  missed (not a finite figure): ${r.missedKills.join('; ')}`);
  say(`false deaths: ${r.falseDeaths}${r.falseDeathIds.length ? ` (${r.falseDeathIds.join(', ')})` : ''}`);
  say(
    `postgres: ${r.pgConnections} connections (${r.pgClientBackends} client backends), backends' PSS ${r.pgBackendsPssMb} MB, private ${r.pgPrivateMbPerBackend} MB each; fleet ${r.fleetQueriesPerSec} statements/s`,
  );
  say(`redis: ${r.redisOpsPerSec} commands/s ${JSON.stringify(r.redisCommands)}, used ${r.redisUsedMemoryMb} MB, rss ${r.redisRssMb} MB`);
  say(`cpu (cores): reaper ${r.cpu.reaper}, simulated fleet ${r.cpu.fleetSim}, postgres ${r.cpu.postgres}, redis ${r.cpu.redis}`);
  say(
    `per executor: Postgres CPU ${r.pgCpuMsPerExecutorPerS} ms a second, ${r.fleetStatementsPerExecutorPerS} statements a second; start over ${r.startWindowS} s, each kit's start → lock p95 ${s(r.attachP95Ms)}, max ${s(r.attachMaxMs)}, ${r.slowAttaches} over 60 s`,
  );
}

main().then(
  (r) => {
    print(r);
    process.exit(0);
  },
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
