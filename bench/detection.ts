/**
 * bench/detection — how long after a crash (SIGKILL) does a dead executor's work run again? (issue #9)
 *
 *   npm run bench:detection -- [--kills 10] [--workflows 20] [--modes liveness,heartbeat] [--schedule-ms 60000]
 *
 * The local stack as `npm start` runs it (the reaper and executorDeath served by functions-framework, the
 * Pub/Sub emulator when installed, a Scheduler stand-in), at the production defaults: the kit's beat every
 * 250 ms with a 15 s TTL, a reaper tick every 250 ms, a 3 s lease, FUNCTION_TIMEOUT_S 150 and a call every
 * 60 s as Terraform deploys it. One survivor executor with the kit stays up. For each kill, a fresh victim
 * executor with the kit starts `--workflows` agent workflows (2 steps of 3 s), is SIGKILLed at a random
 * moment inside its first step, and the bench measures, from the kill:
 *   declared   the recovery's audit row (the reaper declared it and began recovering)
 *   first step the first step that starts on the survivor for the victim's workflows
 *   finished   the last of the victim's workflows SUCCESS
 * Modes, side by side in one run: `liveness` (the kit holds its liveness lock: the default) and `heartbeat`
 * (AFTERLIFE_LIVENESS=off: the heartbeat-only rule). Times are the database clock (step_runs.at,
 * recoveries.started_at) against the kill's wall clock on the same machine.
 */
import { loadavg } from 'node:os';
import type pg from 'pg';
import { consoleLogger } from '../packages/executor/src/log.js';
import type { AgentExecutor } from '../scripts/stack/executor.js';
import { startKillBench, timelineAgreement, timelineFirstStepAt, until } from './killBench.js';
import { median } from './lib.js';

const args = process.argv.slice(2);
const arg = (name: string, def: string) => (args.includes(`--${name}`) ? String(args[args.indexOf(`--${name}`) + 1]) : def);
const KILLS = Number(arg('kills', '10'));
const WORKFLOWS = Number(arg('workflows', '20'));
const MODES = arg('modes', 'liveness,heartbeat').split(',') as Array<'liveness' | 'heartbeat'>;
const SCHEDULE_MS = Number(arg('schedule-ms', '60000'));
const STEP_MS = 3_000;

interface Trial {
  mode: string;
  declaredMs: number;
  firstStepMs: number;
  finishedMs: number;
  /** The death's own timeline (issue 29): its first step elsewhere, from the kill; NaN if it did not close. */
  timelineFirstStepMs: number;
}

const log = consoleLogger({ component: 'bench-detection' }, 'WARNING');

async function main(): Promise<void> {
  const bench = await startKillBench('detect', { scheduleMs: SCHEDULE_MS, logger: log });
  const { stack, sql, load0 } = bench;
  const start = (executorId: string, liveness: boolean) =>
    bench.startExecutor(executorId, bench.kitEnv({ AFTERLIFE_LIVENESS: liveness ? 'on' : 'off' }));
  const trials: Trial[] = [];
  try {
    await start('survivor', true);
    await bench.settle();
    console.log(
      `stack: pub/sub ${stack.pubsub.kind}; reaper called every ${SCHEDULE_MS} ms; load ${load0.map((l) => l.toFixed(2)).join(' ')}`,
    );
    for (const mode of MODES) {
      for (let k = 0; k < KILLS; k++) {
        const t = await trial(mode, k, start, sql);
        trials.push(t);
        console.log(
          `${mode} #${k + 1}: declared ${t.declaredMs} ms, first step ${t.firstStepMs} ms (the timeline says ${t.timelineFirstStepMs} ms, ` +
            `${t.timelineFirstStepMs - t.firstStepMs} ms apart), finished ${t.finishedMs} ms`,
        );
      }
    }
  } finally {
    await bench.stop();
  }
  report(trials, load0);
}

async function trial(
  mode: 'liveness' | 'heartbeat',
  k: number,
  start: (id: string, liveness: boolean) => Promise<AgentExecutor>,
  sql: pg.Pool,
): Promise<Trial> {
  const victimId = `victim-${mode}-${k}`;
  const victim = await start(victimId, mode === 'liveness');
  const ids = Array.from({ length: WORKFLOWS }, (_, i) => `${victimId}-wf-${i}`);
  for (const id of ids) await victim.start(id, { steps: 2, stepMs: STEP_MS });
  await until(`${WORKFLOWS} steps started on ${victimId}`, 30_000, async () => {
    const r = await sql.query<{ n: number }>(
      `SELECT count(DISTINCT workflow_id)::int AS n FROM public.step_runs WHERE executor_id = $1 AND phase = 'start'`,
      [victimId],
    );
    return r.rows[0]?.n === WORKFLOWS;
  });
  // A random moment against the beat and the tick grids, inside the first step.
  await new Promise((r) => setTimeout(r, 200 + Math.random() * 1_500));
  const killedAt = Date.now();
  victim.kill('SIGKILL');
  await victim.exited;
  const firstStep = await until(`the survivor starts ${victimId}'s work`, 90_000, async () => {
    const r = await sql.query<{ t: Date | null }>(
      `SELECT min(at) AS t FROM public.step_runs WHERE executor_id = 'survivor' AND phase = 'start' AND workflow_id = ANY($1)`,
      [ids],
    );
    return r.rows[0]?.t?.getTime();
  });
  const finished = await until(`${victimId}'s workflows SUCCESS`, 120_000, async () => {
    const r = await sql.query<{ n: number; last: string | null }>(
      `SELECT count(*)::int AS n, max(updated_at)::text AS last FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) AND status = 'SUCCESS'`,
      [ids],
    );
    return r.rows[0]?.n === WORKFLOWS ? Number(r.rows[0].last) : undefined;
  });
  const declared = await sql.query<{ t: Date | null }>(`SELECT min(started_at) AS t FROM afterlife.recoveries WHERE executor_id = $1`, [
    victimId,
  ]);
  const declaredAt = declared.rows[0]?.t?.getTime() ?? NaN;
  // One source of truth: what afterlife recorded of this death, beside the outside observation above.
  const timeline = await timelineFirstStepAt(sql, victimId);
  return {
    mode,
    declaredMs: declaredAt - killedAt,
    firstStepMs: firstStep - killedAt,
    finishedMs: finished - killedAt,
    timelineFirstStepMs: timeline - killedAt,
  };
}

function report(trials: Trial[], load0: number[]): void {
  const p95 = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil(0.95 * s.length) - 1)] ?? NaN;
  };
  const fmt = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const rows: Record<string, Record<string, number>> = {};
  console.log(
    `\n| mode | kills | kill → declared (median / p95 / max) | kill → first step (median / p95 / max) | kill → all finished (median / p95 / max) |`,
  );
  console.log(`|---|---|---|---|---|`);
  for (const mode of MODES) {
    const ts = trials.filter((t) => t.mode === mode);
    if (!ts.length) continue;
    const col = (f: (t: Trial) => number) => {
      const xs = ts.map(f);
      return `${fmt(median(xs))} / ${fmt(p95(xs))} / ${fmt(Math.max(...xs))}`;
    };
    rows[mode] = { firstStep: median(ts.map((t) => t.firstStepMs)), declared: median(ts.map((t) => t.declaredMs)) };
    console.log(`| ${mode} | ${ts.length} | ${col((t) => t.declaredMs)} | ${col((t) => t.firstStepMs)} | ${col((t) => t.finishedMs)} |`);
  }
  console.log(`\n${timelineAgreement(trials.map((t) => ({ timelineMs: t.timelineFirstStepMs, outsideMs: t.firstStepMs })))}`);
  if (rows.liveness && rows.heartbeat) {
    console.log(
      `\nheartbeat-only / liveness, median kill → first step: ${(rows.heartbeat.firstStep! / rows.liveness.firstStep!).toFixed(1)}×`,
    );
  }
  console.log(
    `load average before ${load0.map((l) => l.toFixed(2)).join(' ')}, after ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
}

await main();
