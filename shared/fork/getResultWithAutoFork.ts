import { divergenceOf } from './detect.js';
import { executePlan, type ForkClient, forkId, lineageOf, planDivergenceFork, type TargetVersion } from './plan.js';

/**
 * For app code: await a workflow's result; when it ends in replay divergence, fork it (from the divergent
 * step, or a parent from the step that started the diverged child) and follow the fork, at most
 * `maxForks` per lineage. It uses the same planner and deterministic fork IDs as afterlife's reaper, so
 * whichever of them acts first makes the fork and the other finds it (23505 → already forked).
 * It also follows a fork-to-latest fork of a cancelled original (same deterministic ID).
 *
 * It needs only a DBOSClient and writes nothing of afterlife's: no ledger row, no dead letter. The reaper
 * records its forks in the ledger by reconciliation (shared/fork/reconcile.ts: root and n derived from
 * DBOS's forked_from chain), and dead-letters the lineage when its last fork diverges. An optional ledger
 * dependency was rejected: the app would need afterlife's pool, schema and grants, and reconciliation is
 * needed anyway for afterlife processes that die between a fork and its row. A fresh child this helper
 * forks is never taken for a lineage of its own, ledger or not: the reaper recognises its ID.
 */
export class ForkBudgetExhaustedError extends Error {
  constructor(readonly rootWorkflowId: string, readonly forks: number, readonly workflowId: string, readonly lastError: unknown) {
    super(`workflow ${rootWorkflowId} kept diverging after ${forks} forks (last: ${workflowId})`, { cause: lastError });
    this.name = 'ForkBudgetExhaustedError';
  }
}

export interface AutoForkOptions {
  maxForks?: number;
  targetVersion?: TargetVersion;
  /** Called with each fork this helper follows (made here or found made). */
  onFork?: (info: { from: string; to: string; n: number; startStep: number }) => void;
}

export async function getResultWithAutoFork<R>(client: ForkClient, workflowId: string, opts: AutoForkOptions = {}): Promise<R> {
  const maxForks = opts.maxForks ?? 3;
  let current = workflowId;
  for (;;) {
    try {
      return (await client.retrieveWorkflow<R>(current).getResult()) as R;
    } catch (err) {
      if (!divergenceOf(err)) {
        const next = await forkedOnward(client, current);
        if (!next) throw err;
        current = next;
        continue;
      }
      const planned = await planDivergenceFork(client, current, { maxForks, targetVersion: opts.targetVersion ?? 'latest' });
      if (planned.kind === 'exhausted') throw new ForkBudgetExhaustedError(planned.root, planned.n - 1, current, err);
      if (planned.kind === 'skip') throw err;
      await executePlan(client, planned.plan);
      opts.onFork?.({ from: current, to: planned.plan.newWorkflowId, n: planned.plan.n, startStep: planned.plan.startStep });
      current = planned.plan.newWorkflowId;
    }
  }
}

/** The fork that replaced a cancelled original (fork-to-latest), if there is one. */
async function forkedOnward(client: ForkClient, workflowId: string): Promise<string | undefined> {
  const status = await client.getWorkflow(workflowId);
  if (status?.status !== 'CANCELLED' || !status.wasForkedFrom) return undefined;
  const { root, depth } = await lineageOf(client, workflowId, status.forkedFrom);
  const candidate = forkId(root, depth + 1);
  return (await client.getWorkflow(candidate))?.forkedFrom === workflowId ? candidate : undefined;
}
