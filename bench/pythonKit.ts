/**
 * bench/pythonKit — SIGKILL → first step elsewhere for DBOS Transact for Python 2.30.0 apps with the Python kit.
 *
 *   npm run build && node dist/bench/pythonKit.js [--kills 10] [--workflows 5] [--schedule-ms 60000]
 *
 * The local stack as `npm start` runs it (bench/killBench.ts: the reaper and executorDeath served by
 * functions-framework, the Pub/Sub emulator when installed, a Scheduler stand-in, Terraform's
 * FUNCTION_TIMEOUT_S), three instances of the Python fixture app (test/fixtures/python/kit_app.py) with the
 * kit at its defaults (beat 250 ms, lease 8 s), DBOS's default queue poll (1 s). For each kill a fresh victim
 * starts `--workflows` agent workflows (2 steps of 3 s), is SIGKILLed at a random moment inside its first
 * step, and the bench measures, from the kill: the recovery's audit row, the first step of the victim's
 * work on a survivor (database clock), and the death's own timeline. Needs ../shared/python (setup.sh).
 */
import { loadavg } from 'node:os';
import { consoleLogger } from '../packages/executor/src/log.js';
import { type PythonExecutor, pythonToolchain, startPythonExecutor } from '../scripts/stack/pythonExecutor.js';
import { startKillBench, timelineAgreement, timelineFirstStepAt, until } from './killBench.js';
import { median } from './lib.js';

const args = process.argv.slice(2);
const arg = (name: string, def: string) => (args.includes(`--${name}`) ? String(args[args.indexOf(`--${name}`) + 1]) : def);
const KILLS = Number(arg('kills', '10'));
const WORKFLOWS = Number(arg('workflows', '5'));
const SCHEDULE_MS = Number(arg('schedule-ms', '60000'));
const STEP_MS = 3_000;

interface Trial {
  declaredMs: number;
  firstStepMs: number;
  timelineFirstStepMs: number;
}

const log = consoleLogger({ component: 'bench-python-kit' }, 'WARNING');

async function main(): Promise<void> {
  const toolchain = pythonToolchain();
  if (typeof toolchain === 'string') throw new Error(`no Python toolchain: ${toolchain}`);
  const bench = await startKillBench('python', { scheduleMs: SCHEDULE_MS, logger: log });
  const { stack, sql, load0, app, url } = bench;
  const executors: PythonExecutor[] = [];
  const start = async (executorId: string): Promise<PythonExecutor> => {
    const e = await startPythonExecutor({ databaseUrl: url, applicationName: app, executorId, env: bench.kitEnv() });
    executors.push(e);
    return e;
  };
  const trials: Trial[] = [];
  try {
    await start('survivor-1');
    await start('survivor-2');
    await bench.settle();
    console.log(
      `stack: pub/sub ${stack.pubsub.kind}; reaper called every ${SCHEDULE_MS} ms; load ${load0.map((l) => l.toFixed(2)).join(' ')}`,
    );
    for (let k = 0; k < KILLS; k++) {
      const victimId = `victim-${k}`;
      const victim = await start(victimId);
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
      const firstStep = await until(`a survivor starts ${victimId}'s work`, 90_000, async () => {
        const r = await sql.query<{ t: Date | null }>(
          `SELECT min(at) AS t FROM public.step_runs WHERE executor_id <> $1 AND phase = 'start' AND workflow_id = ANY($2)`,
          [victimId, ids],
        );
        return r.rows[0]?.t?.getTime();
      });
      await until(`${victimId}'s workflows SUCCESS`, 120_000, async () => {
        const r = await sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) AND status = 'SUCCESS'`,
          [ids],
        );
        return r.rows[0]?.n === WORKFLOWS;
      });
      const declared = await sql.query<{ t: Date | null }>(`SELECT min(started_at) AS t FROM afterlife.recoveries WHERE executor_id = $1`, [
        victimId,
      ]);
      const timeline = await timelineFirstStepAt(sql, victimId);
      const t: Trial = {
        declaredMs: (declared.rows[0]?.t?.getTime() ?? NaN) - killedAt,
        firstStepMs: firstStep - killedAt,
        timelineFirstStepMs: timeline - killedAt,
      };
      trials.push(t);
      console.log(
        `kill #${k + 1}: declared ${t.declaredMs} ms, first step elsewhere ${t.firstStepMs} ms (timeline ${t.timelineFirstStepMs} ms)`,
      );
    }
  } finally {
    await Promise.all(executors.map((e) => e.stop()));
    await bench.stop();
  }
  const p95 = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil(0.95 * s.length) - 1)] ?? NaN;
  };
  const fmt = (xs: number[]) =>
    `${(median(xs) / 1000).toFixed(2)} s / ${(p95(xs) / 1000).toFixed(2)} s / ${(Math.max(...xs) / 1000).toFixed(2)} s`;
  console.log(`\n| kills | kill → declared (median / p95 / max) | kill → first step elsewhere (median / p95 / max) |`);
  console.log(`|---|---|---|`);
  console.log(`| ${trials.length} | ${fmt(trials.map((t) => t.declaredMs))} | ${fmt(trials.map((t) => t.firstStepMs))} |`);
  console.log(`\n${timelineAgreement(trials.map((t) => ({ timelineMs: t.timelineFirstStepMs, outsideMs: t.firstStepMs })))}`);
  console.log(
    `load average before ${load0.map((l) => l.toFixed(2)).join(' ')}, after ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
}

await main();
