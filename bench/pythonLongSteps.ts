/**
 * bench/pythonLongSteps — live DBOS for Python instances in long steps: never declared dead, no step run twice.
 *
 *   npm run build && node dist/bench/pythonLongSteps.js [--minutes 30] [--kit-long-minutes 15]
 *
 * On the local stack as `npm start` runs it (bench/killBench.ts), for `--minutes`:
 * - with the kit: three instances of the Python fixture app (test/fixtures/python/kit_app.py), one in a
 *   `--kit-long-minutes` step and one in a 60 s step, guarded by the stack's own plane;
 * - without the kit, DBOS's own session names (`dbos_transact`): two applications of two instances each, one in
 *   a step as long as the run, guarded by a reaper in this process at the default UNKNOWN_EXECUTOR_GRACE_MS
 *   (10 minutes) and one at 15 s.
 * At the end: every death the plane recorded for these applications (none expected), and every step body that
 * started more than once (none expected), with the load average. Needs ../shared/python (setup.sh).
 */
import { loadavg } from 'node:os';
import { consoleLogger } from '../packages/executor/src/log.js';
import { runReaper } from '../shared/reaper/index.js';
import { reaperDeps } from '../shared/reaper/deps.js';
import { createRuntime, type Runtime } from '../shared/runtime.js';
import { type PythonExecutor, pythonToolchain, startPythonExecutor } from '../scripts/stack/pythonExecutor.js';
import { startKillBench } from './killBench.js';

const args = process.argv.slice(2);
const arg = (name: string, def: string) => (args.includes(`--${name}`) ? String(args[args.indexOf(`--${name}`) + 1]) : def);
const MINUTES = Number(arg('minutes', '30'));
const KIT_LONG_MINUTES = Number(arg('kit-long-minutes', '15'));

const log = consoleLogger({ component: 'bench-python-long' }, 'WARNING');

async function main(): Promise<void> {
  const toolchain = pythonToolchain();
  if (typeof toolchain === 'string') throw new Error(`no Python toolchain: ${toolchain}`);
  const bench = await startKillBench('pylong', { scheduleMs: 60_000, logger: log });
  const { sql, url, app } = bench;
  const executors: PythonExecutor[] = [];
  const runtimes: Runtime[] = [];
  const loads: string[] = [
    loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
  ];
  const start = async (application: string, executorId: string, kit: boolean): Promise<PythonExecutor> => {
    const e = await startPythonExecutor({
      databaseUrl: url,
      applicationName: application,
      executorId,
      applicationVersion: `v-${application}`,
      kit,
      env: kit ? bench.kitEnv() : {},
    });
    executors.push(e);
    return e;
  };
  const noKit = { grace15: `${app}-nk15`, graceDefault: `${app}-nkdef` };
  let stopping = false;
  const reaping: Array<Promise<void>> = [];
  try {
    const k1 = await start(app, 'kit-1', true);
    const k2 = await start(app, 'kit-2', true);
    await start(app, 'kit-3', true);
    await k1.start('kit-long', { steps: 1, stepMs: KIT_LONG_MINUTES * 60_000 });
    await k2.start('kit-60s', { steps: 1, stepMs: 60_000 });
    for (const [which, application] of Object.entries(noKit)) {
      const a = await start(application, `${which}-a`, false);
      await start(application, `${which}-b`, false);
      await a.start(`${which}-long`, { steps: 1, stepMs: MINUTES * 60_000 });
      const rt = await createRuntime({
        env: {
          ...process.env,
          DATABASE_URL: url,
          DBOS_APPLICATION_NAME: application,
          REDIS_URL: bench.stack.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
          REDIS_KEY_PREFIX: bench.stack.env.REDIS_KEY_PREFIX ?? 'afterlife',
          FUNCTION_TIMEOUT_S: '150',
          LOG_LEVEL: 'WARNING',
          ...(which === 'grace15' ? { UNKNOWN_EXECUTOR_GRACE_MS: '15000' } : {}),
        },
        logger: log,
      });
      runtimes.push(rt);
      // Invocations back to back, as Cloud Scheduler's overlapping ones keep one ticking.
      reaping.push(
        (async () => {
          while (!stopping) await runReaper({ ...reaperDeps(rt), detectedBy: `bench-${which}` }, { standby: true });
        })(),
      );
    }
    const until = Date.now() + MINUTES * 60_000;
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, 60_000));
      loads.push(
        loadavg()
          .map((l) => l.toFixed(2))
          .join(' '),
      );
    }
    stopping = true;
    await Promise.all(reaping);
    const apps = [app, noKit.grace15, noKit.graceDefault];
    const deaths = await sql.query<{ application_name: string; executor_id: string; reason: string; started_at: Date }>(
      `SELECT application_name, executor_id, reason, started_at FROM afterlife.recoveries WHERE application_name = ANY($1) ORDER BY started_at`,
      [apps],
    );
    const twice = await sql.query<{ workflow_id: string; step: number; n: number }>(
      `SELECT workflow_id, step, count(*)::int AS n FROM public.step_runs WHERE phase = 'start' GROUP BY 1, 2 HAVING count(*) > 1`,
    );
    const steps = await sql.query<{ workflow_id: string; ended: boolean }>(
      `SELECT workflow_id, bool_or(phase = 'end') AS ended FROM public.step_runs GROUP BY 1 ORDER BY 1`,
    );
    console.log(
      JSON.stringify(
        {
          minutes: MINUTES,
          kitLongMinutes: KIT_LONG_MINUTES,
          deaths: deaths.rows,
          stepsStartedTwice: twice.rows,
          steps: steps.rows,
          loadEveryMinute: loads,
        },
        null,
        2,
      ),
    );
    if (deaths.rows.length > 0 || twice.rows.length > 0) process.exitCode = 1;
  } finally {
    stopping = true;
    await Promise.allSettled(reaping);
    await Promise.all(runtimes.map((rt) => rt.lifecycle.shutdown()));
    await Promise.all(executors.map((e) => e.stop()));
    await bench.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
