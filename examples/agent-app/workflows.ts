import { DBOS } from '@dbos-inc/dbos-sdk';
import pg from 'pg';

/**
 * Agent-like workflows used by the tests, the demo and the benchmarks. Each step records that it ran
 * (which executor, which attempt) in the app's own table, so a test can prove a checkpointed step never
 * ran twice and see which executor finished the work.
 */
export interface AgentSpec {
  steps: number;
  stepMs: number;
  tag?: string | undefined;
  /**
   * Busy-waits this long at the start of each step, after recording it: a step that hogs the event loop
   * (a synchronous parse, a tight loop), so nothing else in the process runs meanwhile — beats included.
   */
  blockMs?: number;
}

let appPool: pg.Pool | undefined;

export function useAppDatabase(url: string): void {
  appPool = new pg.Pool({ connectionString: url, max: 4, application_name: `agent-app-steps` });
  appPool.on('error', () => undefined);
}

export async function ensureStepTable(): Promise<void> {
  await appPool?.query(`CREATE TABLE IF NOT EXISTS public.step_runs (
    workflow_id text NOT NULL, step integer NOT NULL, executor_id text NOT NULL,
    phase text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
}

/**
 * One row per step start and end. A database that is briefly away (a restart under test) is waited out for
 * up to 15 s inside the step, as an app's own write would retry, so the step is not failed for it and its
 * body does not run again.
 */
async function record(workflowId: string, step: number, phase: 'start' | 'end'): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await appPool?.query('INSERT INTO public.step_runs (workflow_id, step, executor_id, phase) VALUES ($1, $2, $3, $4)', [
        workflowId,
        step,
        DBOS.executorID,
        phase,
      ]);
      return;
    } catch (err) {
      const transient =
        /ECONNREFUSED|ECONNRESET|terminating connection|the database system is (starting up|shutting down)|Connection terminated/.test(
          String(err),
        );
      if (!transient || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function agentStep(step: number, stepMs: number, blockMs: number): Promise<string> {
  const id = DBOS.workflowID ?? 'unknown';
  await record(id, step, 'start');
  const until = Date.now() + blockMs;
  while (Date.now() < until) {
    // Deliberately synchronous: the event loop is blocked for blockMs.
  }
  await new Promise((r) => setTimeout(r, stepMs));
  await record(id, step, 'end');
  return `${id}:${step}:${DBOS.executorID}`;
}

async function agentWorkflowFn(spec: AgentSpec): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < spec.steps; i++) {
    out.push(await DBOS.runStep(() => agentStep(i, spec.stepMs, spec.blockMs ?? 0), { name: `step-${i}` }));
  }
  return out;
}

export const agentWorkflow = DBOS.registerWorkflow(agentWorkflowFn, { name: 'agentWorkflow' });
