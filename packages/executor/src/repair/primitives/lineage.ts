import type { DBOSClient } from '@dbos-inc/dbos-sdk';

/**
 * What every repair reads from DBOS through `DBOSClient` before it acts: where a workflow sits in its fork
 * lineage, the deterministic ID of that lineage's next fork, the version and queue a repaired run goes to,
 * and the step after its last checkpoint. Read-only, so the app's helper (getResultWithRepair) shares it.
 */
export type ForkClient = Pick<
  DBOSClient,
  'getWorkflow' | 'listWorkflowSteps' | 'forkWorkflow' | 'cancelWorkflow' | 'getLatestApplicationVersion' | 'retrieveWorkflow'
> &
  // Optional: a client without rewind (older than the supported 5.2.11) makes every repair a fork.
  Partial<Pick<DBOSClient, 'rewindWorkflow'>>;

export type TargetVersion = 'latest' | 'original';

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

/** Deterministic: the same root and fork number always name the same fork, so retries hit the primary key. */
export function forkId(root: string, n: number): string {
  return `${root}-fork-${n}`;
}

/** How far a workflow is from the root of its fork lineage (DBOS's `forked_from` chain). */
export async function lineageOf(
  client: ForkClient,
  workflowId: string,
  forkedFrom: string | undefined,
): Promise<{ root: string; depth: number }> {
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

/** The step right after a workflow's last checkpoint: where a stuck or orphaned workflow resumes. */
export async function stepAfterLastCheckpoint(client: ForkClient, workflowId: string): Promise<number> {
  const steps = (await client.listWorkflowSteps(workflowId)) ?? [];
  return steps.reduce((m, s) => Math.max(m, s.functionID + 1), 0);
}
