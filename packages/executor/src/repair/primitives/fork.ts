import { AfterlifeError } from '../../errors.js';
import { type ForkClient, queueOf, type QueueTarget } from './lineage.js';

/**
 * The fork primitive: one fork through DBOS's own `forkWorkflow` under a deterministic ID, so a repeat is
 * "already forked" rather than a second lineage, and a plan's fresh child forked before its parent. What
 * to fork, from which step, onto which version is the situations' choice (shared/repair/situations).
 */
export type ForkReason = 'diverged' | 'child-diverged' | 'orphaned-version' | 'stuck';

export interface ForkPlan {
  /** The workflow being forked. */
  source: string;
  root: string;
  /** This fork's number in the root's lineage (1 = first fork). */
  n: number;
  newWorkflowId: string;
  startStep: number;
  applicationVersion: string | undefined;
  /** The original's queue (and partition), so the fork passes the same flow control; DBOS would default to its internal queue. */
  queue: QueueTarget;
  reason: ForkReason;
  divergedWorkflowId: string | undefined;
  detail: string;
  /**
   * A child started with an explicit ID would be re-attached, not restarted, by a fork from its start
   * step; such a child is forked afresh under a new ID first and the parent's copied start row remapped.
   */
  child?: { source: string; newWorkflowId: string; replacementChildren: Record<string, string> };
}

/**
 * The deterministic fork ID exists but was forked from another workflow (two branches of one lineage
 * diverged, or an ID the app chose clashes). Retrying cannot change that: permanent, for a human.
 */
export class ForkConflictError extends AfterlifeError {
  constructor(
    readonly newWorkflowId: string,
    readonly expectedSource: string,
    readonly actualSource: string | undefined,
  ) {
    super(
      `workflow ${newWorkflowId} exists but was forked from ${actualSource ?? 'nothing'}, not ${expectedSource}`,
      'fork_conflict',
      'permanent',
    );
  }
}

function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err, i = 0; e && i < 5; i++) {
    if ((e as { code?: unknown }).code === '23505') return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * One fork through DBOS's own `forkWorkflow`. It is one READ COMMITTED transaction over four tables
 * (status, inputs, checkpoints with child IDs remapped, streams and events below the cut) that DBOS
 * evolves between releases; copying it by hand would drift. Forking is not idempotent in DBOS: the
 * deterministic ID makes a repeat hit `workflow_status_pkey` (23505), which means "already forked" once
 * `forked_from` confirms it is ours.
 */
export async function forkOnce(
  client: ForkClient,
  f: {
    source: string;
    newWorkflowId: string;
    startStep: number;
    applicationVersion: string | undefined;
    queue?: QueueTarget;
    replacementChildren?: Record<string, string>;
  },
): Promise<'forked' | 'already-forked'> {
  try {
    await client.forkWorkflow(f.source, f.startStep, {
      newWorkflowID: f.newWorkflowId,
      ...f.queue,
      ...(f.applicationVersion !== undefined ? { applicationVersion: f.applicationVersion } : {}),
      ...(f.replacementChildren ? { replacementChildren: f.replacementChildren } : {}),
    });
    return 'forked';
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    const existing = await client.getWorkflow(f.newWorkflowId);
    if (existing?.forkedFrom !== f.source) throw new ForkConflictError(f.newWorkflowId, f.source, existing?.forkedFrom);
    return 'already-forked';
  }
}

/** Executes a plan: the fresh child first (when there is one), then the fork itself. */
export async function executePlan(client: ForkClient, plan: ForkPlan): Promise<'forked' | 'already-forked'> {
  if (plan.child) {
    const child = await client.getWorkflow(plan.child.source);
    await forkOnce(client, {
      source: plan.child.source,
      newWorkflowId: plan.child.newWorkflowId,
      startStep: 0,
      applicationVersion: plan.applicationVersion,
      ...(child ? { queue: queueOf(child) } : {}),
    });
  }
  return forkOnce(client, {
    source: plan.source,
    newWorkflowId: plan.newWorkflowId,
    startStep: plan.startStep,
    applicationVersion: plan.applicationVersion,
    queue: plan.queue,
    ...(plan.child ? { replacementChildren: plan.child.replacementChildren } : {}),
  });
}
