import { type Divergence, divergenceOf } from '../../dbos/divergence.js';
import type { ForkPlan, ForkReason } from '../primitives/fork.js';
import { type ForkClient, forkId, lineageOf, queueOf, type TargetVersion, targetVersionOf } from '../primitives/lineage.js';

/**
 * The fork that escapes a diverged workflow, planned from what DBOS itself reports through `DBOSClient`
 * (status, error, lineage, steps). The same planner serves afterlife's fork of a diverged workflow
 * (divergedFork.ts) and the app's getResultWithRepair with `repair: 'fork'`, so both compute the same
 * deterministic fork ID and converge on one fork.
 */
export type Planned =
  | { kind: 'fork'; plan: ForkPlan }
  | { kind: 'exhausted'; root: string; n: number; workflowId: string; detail: string }
  | { kind: 'skip'; why: 'missing' | 'not-diverged' | 'not-forkable'; status: string | undefined; detail?: string };

/**
 * Where to fork `parentId` so that the descendant named by the error runs again: the step that started the
 * parent's direct child on the path to it (the operation_outputs row with that `child_workflow_id` that is
 * not the `DBOS.getResult` row).
 */
async function childStart(
  client: ForkClient,
  parentId: string,
  descendantId: string,
): Promise<{ childId: string; step: number } | undefined> {
  const steps = (await client.listWorkflowSteps(parentId)) ?? [];
  const startRow = (childId: string) =>
    steps.filter((s) => s.childWorkflowID === childId && !s.name.startsWith('DBOS.')).sort((a, b) => a.functionID - b.functionID)[0];
  let childId: string | undefined = descendantId;
  for (let hops = 0; childId && hops < 100; hops++) {
    const row = startRow(childId);
    if (row) return { childId, step: row.functionID };
    childId = (await client.getWorkflow(childId))?.parentWorkflowID;
  }
  return undefined;
}

export interface PlanOptions {
  maxForks: number;
  targetVersion: TargetVersion;
  /** Rewinds the lineage had (afterlife's rewind ledger): they share the budget with its forks. */
  priorRewinds?: number;
}

/** The fork that escapes a diverged workflow, or why there is none. Never forks an ordinary ERROR. */
export async function planDivergenceFork(client: ForkClient, workflowId: string, opts: PlanOptions): Promise<Planned> {
  const status = await client.getWorkflow(workflowId);
  if (!status) return { kind: 'skip', why: 'missing', status: undefined };
  if (status.status !== 'ERROR') return { kind: 'skip', why: 'not-diverged', status: status.status };
  const d: Divergence | undefined = divergenceOf(status.error);
  if (!d) return { kind: 'skip', why: 'not-diverged', status: status.status };

  let startStep = d.stepId;
  let reason: ForkReason = 'diverged';
  let explicitChild: string | undefined;
  if (d.workflowId !== workflowId) {
    const start = await childStart(client, workflowId, d.workflowId);
    if (!start) {
      // Awaited with retrieveWorkflow().getResult() rather than started here: a fork would await the same
      // failed workflow again. Left for a human, never looped on.
      return {
        kind: 'skip',
        why: 'not-forkable',
        status: status.status,
        detail: `error names ${d.workflowId}, which ${workflowId} did not start`,
      };
    }
    reason = 'child-diverged';
    startStep = start.step;
    // DBOS names a child `${parent}-${functionId}` unless the app chose an ID.
    if (start.childId !== `${workflowId}-${start.step}`) explicitChild = start.childId;
  }

  const { root, depth } = await lineageOf(client, workflowId, status.forkedFrom);
  const n = depth + 1;
  if (n + (opts.priorRewinds ?? 0) > opts.maxForks)
    return { kind: 'exhausted', root, n: n + (opts.priorRewinds ?? 0), workflowId, detail: d.message };
  const newWorkflowId = forkId(root, n);
  const applicationVersion = await targetVersionOf(client, opts.targetVersion, status.applicationVersion);
  const plan: ForkPlan = {
    source: workflowId,
    root,
    n,
    newWorkflowId,
    startStep,
    applicationVersion,
    queue: queueOf(status),
    reason,
    divergedWorkflowId: d.workflowId,
    detail: d.message,
  };
  if (explicitChild) {
    // Not DBOS's default child name, so that a later divergence of this child is again seen as app-named.
    const freshChild = `${newWorkflowId}-child-${startStep}`;
    // Fork the parent past the start row (copied, remapped to the fresh child), which then starts from 0.
    plan.startStep = startStep + 1;
    plan.child = { source: explicitChild, newWorkflowId: freshChild, replacementChildren: { [explicitChild]: freshChild } };
  }
  return { kind: 'fork', plan };
}
