import { DBOS } from '@dbos-inc/dbos-sdk';
import pg from 'pg';

/**
 * Workflows that replay differently, the way an LLM agent does: the tests use them to produce real
 * `DBOSUnexpectedStepError`s (code 26) in real executors. Every step records that it ran in
 * `public.step_runs` (created by main.ts), so a test can prove that a step before the fork point never ran
 * twice. Started from outside with `DBOSClient.enqueue` by workflow name.
 *
 *   divergentWorkflow        picks its second step from `public.divergent_choice` in workflow code (not in a
 *                            step), so a replay after the row was flipped diverges at function_id 1
 *   parentWorkflow           starts divergentWorkflow as a child (default child ID) and awaits it
 *   alwaysDivergentWorkflow  every execution, its own included, finds a checkpoint recorded by a "stale
 *                            execution" at function_id 1 under a different name: it diverges every time
 *   failingWorkflow          an ordinary ERROR: a step throws
 *   streamingDivergentWorkflow  divergentWorkflow's steps, each output also written to the stream `tokens`
 *                            (as an agent streams its tokens), then the stream closed
 */
export interface DivergentSpec {
  /** Row of public.divergent_choice that picks the tool; absent → 'a'. */
  key: string;
  /** How long the last step takes, so a test can kill the executor while it runs. */
  lastStepMs: number;
  /** parentWorkflow only: start the child under this ID instead of DBOS's default `${parent}-${functionId}`. */
  childId?: string;
}

let pool: pg.Pool | undefined;

function db(): pg.Pool {
  if (!pool) {
    pool = new pg.Pool({ connectionString: process.env.DBOS_SYSTEM_DATABASE_URL, max: 2, application_name: 'agent-app-divergent' });
    pool.on('error', () => undefined);
  }
  return pool;
}

async function recordRun(step: number, phase: 'start' | 'end'): Promise<void> {
  await db().query('INSERT INTO public.step_runs (workflow_id, step, executor_id, phase) VALUES ($1, $2, $3, $4)', [
    DBOS.workflowID ?? 'unknown',
    step,
    DBOS.executorID,
    phase,
  ]);
}

async function runStep(step: number, name: string, ms = 0): Promise<string> {
  return DBOS.runStep(
    async () => {
      await recordRun(step, 'start');
      if (ms > 0) await new Promise((r) => setTimeout(r, ms));
      await recordRun(step, 'end');
      return `${name}@${DBOS.executorID}`;
    },
    { name },
  );
}

/** The nondeterministic input: read in workflow code, so a replay may see another value. */
async function readChoice(key: string): Promise<string> {
  try {
    const res = await db().query<{ value: string }>('SELECT value FROM public.divergent_choice WHERE key = $1', [key]);
    return res.rows[0]?.value ?? 'a';
  } catch (err) {
    if ((err as { code?: unknown }).code === '42P01') return 'a'; // the test did not create the table
    throw err;
  }
}

async function divergentFn(spec: DivergentSpec): Promise<string[]> {
  const out = [await runStep(0, 'plan')];
  const tool = await readChoice(spec.key);
  out.push(await runStep(1, `tool-${tool}`));
  out.push(await runStep(2, 'answer', spec.lastStepMs));
  return out;
}
export const divergentWorkflow = DBOS.registerWorkflow(divergentFn, { name: 'divergentWorkflow' });

async function parentFn(spec: DivergentSpec): Promise<string[]> {
  const out = [await runStep(0, 'prepare')];
  const child = await DBOS.startWorkflow(divergentWorkflow, spec.childId ? { workflowID: spec.childId } : undefined)(spec); // function_id 1
  out.push(...(await child.getResult())); // function_id 2: DBOS.getResult
  out.push(await runStep(3, 'summarize'));
  return out;
}
export const parentWorkflow = DBOS.registerWorkflow(parentFn, { name: 'parentWorkflow' });

/**
 * Simulates what two racing executions of one workflow do (dbos-transact-py#688): another execution has
 * already recorded a different step at function_id 1. Written in workflow code before step 1, for this
 * execution's own ID, so a fork (a new ID) meets the same fate: every lineage member diverges at 1.
 */
async function alwaysDivergentFn(): Promise<string[]> {
  const out = [await runStep(0, 'plan')];
  await db().query(
    `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms)
     VALUES ($1, 1, 'stale-execution-step', $2, $2) ON CONFLICT DO NOTHING`,
    [DBOS.workflowID, Date.now()],
  );
  out.push(await runStep(1, 'tool'));
  return out;
}
export const alwaysDivergentWorkflow = DBOS.registerWorkflow(alwaysDivergentFn, { name: 'alwaysDivergentWorkflow' });

async function failingFn(): Promise<string> {
  await runStep(0, 'plan');
  return DBOS.runStep(
    async () => {
      await recordRun(1, 'start');
      throw new Error('tool exploded');
    },
    { name: 'tool' },
  );
}
export const failingWorkflow = DBOS.registerWorkflow(failingFn, { name: 'failingWorkflow' });

async function streamingDivergentFn(spec: DivergentSpec): Promise<string[]> {
  const out = [await runStep(0, 'plan')];
  await DBOS.writeStream('tokens', out[0]);
  const tool = await readChoice(spec.key);
  out.push(await runStep(1, `tool-${tool}`));
  await DBOS.writeStream('tokens', out[1]);
  out.push(await runStep(2, 'answer', spec.lastStepMs));
  await DBOS.writeStream('tokens', out[2]);
  await DBOS.closeStream('tokens');
  return out;
}
export const streamingDivergentWorkflow = DBOS.registerWorkflow(streamingDivergentFn, { name: 'streamingDivergentWorkflow' });
