import type { DBOSClient } from '@dbos-inc/dbos-sdk';
import { AfterlifeError } from '../errors.js';
import { type Divergence, divergenceOf } from '../dbos/divergence.js';

/**
 * Planning a fork from what DBOS itself reports through `DBOSClient` (status, error, lineage, steps).
 * The same planner serves afterlife's autoFork (reaper, orphaned versions) and the app's
 * getResultWithAutoFork, so both compute the same deterministic fork ID and converge on one fork.
 */
export type ForkClient = Pick<
  DBOSClient,
  'getWorkflow' | 'listWorkflowSteps' | 'forkWorkflow' | 'cancelWorkflow' | 'getLatestApplicationVersion' | 'retrieveWorkflow'
> &
  // Optional: a client without rewind (older than the supported 5.2.11) makes every repair a fork.
  Partial<Pick<DBOSClient, 'rewindWorkflow'>>;

export type ForkReason = 'diverged' | 'child-diverged' | 'orphaned-version' | 'stuck';
export type TargetVersion = 'latest' | 'original';

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

export interface QueueTarget {
  queueName?: string;
  queuePartitionKey?: string;
}

const INTERNAL_QUEUE = '_dbos_internal_queue';

/** The queue a fork should run on: the original's own, unless it had none or DBOS's internal one. */
export function queueOf(status: { queueName?: string | undefined; queuePartitionKey?: string | undefined }): QueueTarget {
  if (!status.queueName || status.queueName === INTERNAL_QUEUE) return {};
  return { queueName: status.queueName, ...(status.queuePartitionKey ? { queuePartitionKey: status.queuePartitionKey } : {}) };
}

export type Planned =
  | { kind: 'fork'; plan: ForkPlan }
  | { kind: 'exhausted'; root: string; n: number; workflowId: string; detail: string }
  | { kind: 'skip'; why: 'missing' | 'not-diverged' | 'not-forkable'; status: string | undefined; detail?: string };

/** Deterministic: the same root and fork number always name the same fork, so retries hit the primary key. */
export function forkId(root: string, n: number): string {
  return `${root}-fork-${n}`;
}

/** How far a workflow is from the root of its fork lineage (DBOS's `forked_from` chain). */
export async function lineageOf(client: ForkClient, workflowId: string, forkedFrom: string | undefined): Promise<{ root: string; depth: number }> {
  let root = workflowId;
  let next = forkedFrom;
  let depth = 0;
  const seen = new Set([workflowId]);
  while (next && !seen.has(next) && depth < 1_000) {
    seen.add(next);
    root = next;
    depth += 1;
    const up = await client.getWorkflow(next);
    next = up?.forkedFrom;
  }
  return { root, depth };
}

export async function targetVersionOf(client: ForkClient, mode: TargetVersion, original: string | undefined): Promise<string | undefined> {
  if (mode === 'original') return original;
  return (await client.getLatestApplicationVersion()).versionName;
}

/**
 * Where to fork `parentId` so that the descendant named by the error runs again: the step that started the
 * parent's direct child on the path to it (the operation_outputs row with that `child_workflow_id` that is
 * not the `DBOS.getResult` row).
 */
async function childStart(client: ForkClient, parentId: string, descendantId: string): Promise<{ childId: string; step: number } | undefined> {
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
      return { kind: 'skip', why: 'not-forkable', status: status.status, detail: `error names ${d.workflowId}, which ${workflowId} did not start` };
    }
    reason = 'child-diverged';
    startStep = start.step;
    // DBOS names a child `${parent}-${functionId}` unless the app chose an ID.
    if (start.childId !== `${workflowId}-${start.step}`) explicitChild = start.childId;
  }

  const { root, depth } = await lineageOf(client, workflowId, status.forkedFrom);
  const n = depth + 1;
  if (n + (opts.priorRewinds ?? 0) > opts.maxForks) return { kind: 'exhausted', root, n: n + (opts.priorRewinds ?? 0), workflowId, detail: d.message };
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

/**
 * The deterministic fork ID exists but was forked from another workflow (two branches of one lineage
 * diverged, or an ID the app chose clashes). Retrying cannot change that: permanent, for a human.
 */
export class ForkConflictError extends AfterlifeError {
  constructor(readonly newWorkflowId: string, readonly expectedSource: string, readonly actualSource: string | undefined) {
    super(`workflow ${newWorkflowId} exists but was forked from ${actualSource ?? 'nothing'}, not ${expectedSource}`, 'fork_conflict', 'permanent');
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
