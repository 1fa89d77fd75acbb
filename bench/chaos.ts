/**
 * bench/chaos — under random faults, does any step run twice, do two executors ever run the same workflow at
 * once, is anything alive ever declared dead?
 *
 *   npm run bench:chaos -- --minutes 10 [--executors 4] [--seed N] [--faults kill,term,freeze,longFreeze,lostHost]
 *     [--fault-every-s 15] [--every-ms 500] [--long 0.2] [--settle-s 16] [--drain-s 120] [--pubsub emulator|bridge] [--json]
 *
 * On a Postgres and a Redis of its own (bench/fleet's private servers), the local stack as `npm start` runs it
 * (the reaper and executorDeath served by functions-framework as deployed, a Scheduler stand-in every 60 s,
 * FUNCTION_TIMEOUT_S 150, the Pub/Sub emulator when installed), `--executors` real DBOS executors with the kit
 * (the example agent app, its defaults: beat 250 ms, lease 8 s), each with every Postgres connection through a
 * forwarder of its own (Cloud SQL's proxy). A steady stream of agent workflows (2–5 steps of 0.3–1.5 s, a
 * `--long` share of 3–6 s) goes to random live executors, one every `--every-ms`; faults come at random
 * moments (exponential, mean `--fault-every-s`) from a PRNG seeded by `--seed` (the schedule is the seed's;
 * the timing is the machine's), the kinds in rounds — the first in the order given, then shuffled:
 *   kill        SIGKILL
 *   term        SIGTERM (the kit drains and hands over); SIGKILL 10 s later if still up, as Cloud Run does
 *   freeze      SIGSTOP for 1–5 s, then SIGCONT: must never be declared
 *   longFreeze  SIGSTOP for 13 s (lease + 5 s), then SIGCONT: declared, and must exit 75 (its fence)
 *   lostHost    its forwarder stops piping both ways and keeps its Postgres legs open 30 s, then SIGKILL
 * Every executor that exits is replaced by a fresh one (a new ID, as Cloud Run would). After `--minutes` the
 * faults and the stream stop, and the run waits up to `--drain-s` for every workflow to end. Then, from the
 * database alone (the app's step_runs, DBOS's checkpoints and statuses, the plane's recoveries and registry):
 *   re-run       a step that started again after a run of it had ended (`end` row) and been checkpointed;
 *                one whose process died between its `end` row and DBOS's checkpoint is DBOS's at-least-once
 *                step, counted apart
 *   overlap      a step body begun (`start` row) by an executor after another had started on the same
 *                workflow, or any row then of an executor no fault ended; the `end` row of the step a faulted
 *                process was in (its body finishing on wake, before the fence exits it) is a tail, counted
 *                apart (docs/liveness.md, "What a freeze means")
 *   false death  any executor declared (a recovery, or `dead` in the registry) that was neither ended by a
 *                fault nor frozen past the lease
 *   lost         a workflow sent (accepted, or written by DBOS though the answer never came) not SUCCESS
 *   unfenced     a 13 s freeze whose process did not exit 75 within 15 s of SIGCONT
 * and per kind, fault → declared and fault → first step elsewhere (p50 / p95 / max). Exits 1 when re-run,
 * overlap, false death, lost or unfenced is above 0, or an executor's replacement failed to start.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { z } from 'zod';
import { loadLine, parseFlags } from './args.js';
import type { AgentSpec } from '../examples/agent-app/workflows.js';
import { consoleLogger } from '../packages/executor/src/log.js';
import { type Stack, startStack } from '../scripts/stack/index.js';
import { startPrivatePostgres } from '../test/helpers/postgresServer.js';
import { startPrivateRedis } from '../test/helpers/redisServer.js';
import { chaosFleet, type ChaosFleet, FAULT_KINDS, type FaultKind } from './chaosFleet.js';
import { declarations, latencies, lateRows, type LateRow, reRuns, type ReRun, type Spread, spread, statuses } from './chaosMeasure.js';

const Args = z
  .object({
    minutes: z.coerce.number().positive().max(240).default(10),
    executors: z.coerce.number().int().min(2).max(32).default(4),
    seed: z.coerce
      .number()
      .int()
      .min(0)
      .default(() => Math.floor(Math.random() * 2 ** 31)),
    faults: z
      .string()
      .default(FAULT_KINDS.join(','))
      .transform((s) => s.split(',').filter(Boolean))
      .pipe(z.array(z.enum(FAULT_KINDS)).min(1)),
    'fault-every-s': z.coerce.number().positive().max(3_600).default(15),
    'every-ms': z.coerce.number().int().min(20).max(60_000).default(500),
    /** The share of workflows whose steps take 3–6 s (the rest: 0.3–1.5 s). */
    long: z.coerce.number().min(0).max(1).default(0.2),
    /** Seconds between the fleet's start and the first fault: Redis keeps its keys for a TTL first. */
    'settle-s': z.coerce.number().int().min(0).max(600).default(16),
    'drain-s': z.coerce.number().int().min(10).max(3_600).default(120),
    pubsub: z.enum(['emulator', 'bridge']).default('emulator'),
    json: z.boolean().default(false),
  })
  .strict();

const args = parseFlags('bench:chaos', Args, process.argv.slice(2));
const say = (line: string) => (args.json ? process.stderr : process.stdout).write(`${line}\n`);
const load = loadLine;
/** Every executor's output, written when it exits (the report names the folder). */
const LOG_DIR = mkdtempSync(join(tmpdir(), 'afterlife-chaos-'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** mulberry32: a small seeded PRNG, so a run's schedule (faults, victims, workflows) is reproducible. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Result {
  seed: number;
  executors: number;
  minutes: number;
  pubsub: string;
  workflows: { sent: number; accepted: number; success: number };
  faults: Record<FaultKind, number>;
  executorsStarted: number;
  reRuns: number;
  reRunIds: ReRun[];
  /** Steps that ran again because their process died between the `end` row and DBOS's checkpoint. */
  atLeastOnceReRuns: number;
  /** Those, with the fault that ended the process that ran them first and how long before its `end` row it came. */
  atLeastOnceIds: Array<ReRun & { fault: string }>;
  overlaps: number;
  overlapIds: LateRow[];
  /** In-flight steps that finished on wake after the replacement had started (`end` rows only), by the fault that stopped them. */
  tails: Partial<Record<FaultKind | 'none', number>>;
  /** How long after SIGCONT a long freeze's tails landed (ms), the largest. */
  tailAfterWakeMaxMs: number | null;
  falseDeaths: number;
  falseDeathIds: string[];
  lost: number;
  lostIds: string[];
  unfenced: number;
  unfencedIds: string[];
  unexpectedExits: string[];
  failedStarts: string[];
  /** Per fault kind: fault → declared, and fault → first step of its work elsewhere (ms). */
  declared: Partial<Record<FaultKind, Spread>>;
  recovery: Partial<Record<FaultKind, Spread>>;
  /** Every fault that ends a process, across kinds. */
  recoveryAll: Spread;
  load: { before: string; after: string };
}

async function main(): Promise<Result> {
  const loadBefore = load();
  const rand = prng(args.seed);
  const app = `chaos-${randomBytes(3).toString('hex')}`;
  const pgServer = await startPrivatePostgres({ settings: { max_connections: String(60 * args.executors + 100) } });
  const redisServer = await startPrivateRedis();
  const sql = new pg.Pool({ connectionString: pgServer.url, max: 2 });
  sql.on('error', () => undefined);
  let stack: Stack | undefined;
  let fleet: ChaosFleet | undefined;
  try {
    stack = await startStack({
      env: {
        ...process.env,
        DATABASE_URL: pgServer.url,
        REDIS_URL: redisServer.url,
        DBOS_APPLICATION_NAME: app,
        REDIS_KEY_PREFIX: app,
        FUNCTION_TIMEOUT_S: '150',
        LOG_LEVEL: 'WARNING',
      },
      scheduleMs: 60_000,
      forceBridge: args.pubsub === 'bridge',
      logger: consoleLogger({ component: 'bench-chaos' }, 'WARNING'),
    });
    if (stack.pubsub.kind !== 'emulator')
      say(`!!! chaos: NO DEATH NOTICES (${stack.pubsub.reason}): a SIGTERM's work is found by the reaper alone`);
    const env = {
      ...stack.env,
      AFTERLIFE_KIT: 'on',
      DBOS_APP_NAME: app,
      REDIS_KEY_PREFIX: app,
      ...(stack.pubsub.kind === 'emulator' ? {} : { AFTERLIFE_PUBLISH: 'none' }),
    };
    fleet = chaosFleet({ url: pgServer.url, app, env, size: args.executors, rand, say, logDir: LOG_DIR });
    say(
      `chaos: seed ${args.seed}, ${args.executors} executors, faults ${args.faults.join(',')} every ~${args['fault-every-s']} s, ` +
        `a workflow every ${args['every-ms']} ms, pub/sub ${stack.pubsub.kind}; postgres :${pgServer.port}; load ${loadBefore}`,
    );
    await fleet.start();
    await sleep(args['settle-s'] * 1000);
    const sent = await soak(fleet, rand);
    return await measure(sql, app, fleet, sent, stack.pubsub.kind, loadBefore);
  } finally {
    await fleet?.stop();
    await stack?.stop();
    await sql.end();
    await redisServer.stop();
    await pgServer.stop();
  }
}

interface Sent {
  ids: string[];
  accepted: Set<string>;
}

/** The stream and the faults for `--minutes`, then the wait for every fault to end and every workflow to finish. */
async function soak(fleet: ChaosFleet, rand: () => number): Promise<Sent> {
  const sent: Sent = { ids: [], accepted: new Set() };
  const end = Date.now() + args.minutes * 60_000;
  const stream = setInterval(() => {
    const id = `wf-${sent.ids.length + 1}`;
    sent.ids.push(id);
    void fleet.send(id, spec(rand)).then((ok) => ok && sent.accepted.add(id));
  }, args['every-ms']);
  const cycle: FaultKind[] = [];
  let nextFault = Date.now() + exponential(rand, args['fault-every-s'] * 1000);
  const progress = setInterval(
    () => say(`  … ${sent.accepted.size}/${sent.ids.length} workflows accepted, ${fleet.faults.length} faults; load ${load()}`),
    30_000,
  );
  try {
    while (Date.now() < end) {
      await sleep(Math.max(0, Math.min(nextFault, end) - Date.now()));
      if (Date.now() >= end) break;
      // The first round in the order given (a smoke can put the longest fault first), then shuffled rounds.
      if (!cycle.length) cycle.push(...(fleet.faults.length ? shuffle([...args.faults], rand) : args.faults));
      const kind = cycle[0] as FaultKind;
      const f = fleet.fault(kind);
      if (f) {
        cycle.shift();
        say(`fault: ${kind} ${f.executorId}${f.frozenMs ? ` for ${f.frozenMs} ms` : ''} (load ${load()})`);
        nextFault = Date.now() + exponential(rand, args['fault-every-s'] * 1000);
      } else nextFault = Date.now() + 500;
    }
  } finally {
    clearInterval(stream);
    clearInterval(progress);
  }
  await fleet.settle(60_000);
  say(`chaos: faults over; waiting up to ${args['drain-s']} s for ${sent.ids.length} workflows (load ${load()})`);
  return sent;
}

async function measure(sql: pg.Pool, app: string, fleet: ChaosFleet, sent: Sent, pubsub: string, loadBefore: string): Promise<Result> {
  // Every workflow sent that DBOS holds must end SUCCESS; one accepted that DBOS never wrote is lost too.
  const deadline = Date.now() + args['drain-s'] * 1000;
  let st = await statuses(sql, sent.ids);
  const open = () =>
    [...sent.accepted]
      .filter((id) => st.get(id) !== 'SUCCESS')
      .concat([...st].filter(([id, s]) => !sent.accepted.has(id) && s !== 'SUCCESS').map(([id]) => id));
  while (open().length && Date.now() < deadline) {
    await sleep(1_000);
    st = await statuses(sql, sent.ids);
  }
  const died = new Set(fleet.faults.filter((f) => f.kind !== 'freeze').map((f) => f.executorId));
  const runs = await reRuns(sql, died);
  const late = await lateRows(sql);
  // A row of an executor no fault ended, after another took its workflow, is an overlap whatever its phase.
  const lapped = late.filter((x) => x.phase === 'start' || !died.has(x.executorId));
  const declared = await declarations(sql, app);
  const lat = await latencies(sql, fleet.faults, declared);
  const falseDeathIds = declared.filter((d) => !died.has(d.executorId)).map((d) => `${d.executorId} at ${d.at} (${d.how})`);
  const count = (k: FaultKind) => fleet.faults.filter((f) => f.kind === k).length;
  const kinds = args.faults;
  const unfenced = fleet.faults.filter((f) => f.unfenced).map((f) => `${f.executorId} (exit ${f.exit?.code ?? f.exit?.signal ?? 'none'})`);
  const lostIds = open();
  return {
    seed: args.seed,
    executors: args.executors,
    minutes: args.minutes,
    pubsub,
    workflows: { sent: sent.ids.length, accepted: sent.accepted.size, success: [...st.values()].filter((s) => s === 'SUCCESS').length },
    faults: Object.fromEntries(FAULT_KINDS.map((k) => [k, count(k)])) as Record<FaultKind, number>,
    executorsStarted: fleet.started.length,
    reRuns: runs.filter((r) => r.checkpointed).length,
    reRunIds: runs.filter((r) => r.checkpointed),
    atLeastOnceReRuns: runs.filter((r) => !r.checkpointed).length,
    atLeastOnceIds: runs
      .filter((r) => !r.checkpointed)
      .map((r) => {
        const f = fleet.faults.find((x) => x.executorId === r.endedBy && x.kind !== 'freeze');
        return { ...r, fault: f ? `${f.kind} ${new Date(r.endedAt).getTime() - f.at} ms after it` : 'none' };
      }),
    overlaps: lapped.length,
    overlapIds: lapped,
    ...tailsOf(late, fleet),
    falseDeaths: falseDeathIds.length,
    falseDeathIds,
    lost: lostIds.length,
    lostIds: lostIds.map((id) => `${id} (${st.get(id) ?? 'never written'})`),
    unfenced: unfenced.length,
    unfencedIds: unfenced,
    unexpectedExits: fleet.unexpectedExits,
    failedStarts: fleet.failedStarts,
    declared: Object.fromEntries(
      kinds.filter((k) => k !== 'freeze').map((k) => [k, spread(lat.filter((l) => l.kind === k).map((l) => l.declaredMs))]),
    ),
    recovery: Object.fromEntries(
      kinds.filter((k) => k !== 'freeze').map((k) => [k, spread(lat.filter((l) => l.kind === k).map((l) => l.firstStepMs))]),
    ),
    recoveryAll: spread(lat.map((l) => l.firstStepMs)),
    load: { before: loadBefore, after: load() },
  };
}

function tailsOf(late: LateRow[], fleet: ChaosFleet): Pick<Result, 'tails' | 'tailAfterWakeMaxMs'> {
  const tails: Partial<Record<FaultKind | 'none', number>> = {};
  let wakeMax: number | null = null;
  for (const t of late.filter((x) => x.phase === 'end' && fleet.faults.some((f) => f.executorId === x.executorId && f.kind !== 'freeze'))) {
    const f = fleet.faults.find((x) => x.executorId === t.executorId && x.kind !== 'freeze');
    const k = f?.kind ?? 'none';
    tails[k] = (tails[k] ?? 0) + 1;
    if (f?.kind === 'longFreeze') wakeMax = Math.max(wakeMax ?? -Infinity, new Date(t.at).getTime() - (f.at + (f.frozenMs ?? 0)));
  }
  return { tails, tailAfterWakeMaxMs: wakeMax };
}

function spec(rand: () => number): AgentSpec {
  const long = rand() < args.long;
  return { steps: 2 + Math.floor(rand() * 4), stepMs: Math.round(long ? 3_000 + rand() * 3_000 : 300 + rand() * 1_200) };
}

function exponential(rand: () => number, meanMs: number): number {
  return -Math.log(1 - rand()) * meanMs;
}

function shuffle<T>(xs: T[], rand: () => number): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [xs[i], xs[j]] = [xs[j] as T, xs[i] as T];
  }
  return xs;
}

function failed(r: Result): boolean {
  // A replacement that never started leaves a smaller fleet than asked for: the run did not test what it says.
  return r.reRuns + r.overlaps + r.falseDeaths + r.lost + r.unfenced + r.failedStarts.length > 0;
}

function print(r: Result): void {
  if (args.json) {
    console.log(JSON.stringify(r));
    return;
  }
  const s = (ms: number | null) => (ms === null ? '-' : `${(ms / 1000).toFixed(2)} s`);
  const row = (x: Spread | undefined) => (x && x.n ? `${s(x.p50)} / ${s(x.p95)} / ${s(x.max)} (${x.n})` : '-');
  say(
    `\nchaos: seed ${r.seed}, ${r.executors} executors, ${r.minutes} min, pub/sub ${r.pubsub}; load before ${r.load.before}, after ${r.load.after}`,
  );
  say(
    `workflows: ${r.workflows.sent} sent, ${r.workflows.accepted} accepted, ${r.workflows.success} SUCCESS; ${r.executorsStarted} executors started`,
  );
  say(`\n| fault | count | → declared p50 / p95 / max (n) | → first step elsewhere p50 / p95 / max (n) |`);
  say(`|---|---|---|---|`);
  for (const k of FAULT_KINDS)
    say(
      `| ${k} | ${r.faults[k]} | ${k === 'freeze' ? 'never (must be)' : row(r.declared[k])} | ${k === 'freeze' ? '-' : row(r.recovery[k])} |`,
    );
  say(`| all that end a process | | | ${row(r.recoveryAll)} |`);
  say(`\n| check | count |`);
  say(`|---|---|`);
  say(`| re-run (checkpointed step started again) | ${r.reRuns} |`);
  say(`| overlap (a step body begun after another executor took the workflow) | ${r.overlaps} |`);
  say(`| false death | ${r.falseDeaths} |`);
  say(`| lost (not SUCCESS after the drain-out) | ${r.lost} |`);
  say(`| unfenced (13 s freeze did not exit 75) | ${r.unfenced} |`);
  say(`| at-least-once re-run (died between end row and checkpoint) | ${r.atLeastOnceReRuns} |`);
  say(
    `| tail: the in-flight step ended after the replacement began (not a failure) | ${JSON.stringify(r.tails)}, max ${s(r.tailAfterWakeMaxMs)} after SIGCONT |`,
  );
  for (const [what, xs] of [
    ['re-runs', r.reRunIds.map((x) => JSON.stringify(x))],
    ['at-least-once re-runs', r.atLeastOnceIds.map((x) => JSON.stringify(x))],
    ['overlaps', r.overlapIds.map((x) => JSON.stringify(x))],
    ['false deaths', r.falseDeathIds],
    ['lost', r.lostIds],
    ['unfenced', r.unfencedIds],
    ['exits with no fault', r.unexpectedExits],
    ['starts that failed', r.failedStarts],
  ] as const)
    if (xs.length) say(`${what}: ${xs.slice(0, 20).join('; ')}`);
  say(`executors' output: ${LOG_DIR}`);
  say(failed(r) ? '\nFAILED' : '\nheld: 0 re-run, 0 overlap, 0 false deaths, 0 lost');
}

main().then(
  (r) => {
    print(r);
    process.exit(failed(r) ? 1 : 0);
  },
  (err: unknown) => {
    console.error(err);
    process.exit(2);
  },
);
