import { type Db, parseDivergence } from '../../../packages/executor/src/plane/index.js';
import { recordFork } from '../../db/queries/forks.js';
import { findUnledgeredForks } from '../../dbos/diverged.js';

/**
 * Fork-ledger reconciliation. The ledger misses forks that were made without it: by the app's
 * getResultWithAutoFork, which has only a DBOSClient (it is app code: giving it afterlife's pool, schema
 * and grants would couple every app to afterlife's deployment), and by afterlife processes that died
 * between a fork and its row before the row went first. DBOS's `forked_from` chains hold everything a row
 * needs, so the reaper's diverged pass (and autoFork, for its own workflow) records such forks from them:
 * one mechanism for both, and the app helper stays a pure DBOSClient user.
 */
export const RECONCILED_BY = 'reconciled';

export interface ReconcileOptions {
  /** Workflows whose chains to walk (the diverged pass's candidates, autoFork's workflow). */
  workflowIds: string[];
  /** Also walk forks created since (epoch ms, database clock), at most `limit` of them. */
  createdSince?: number | undefined;
  limit?: number;
  /** Report what would be recorded, write nothing. */
  dryRun?: boolean;
}

export interface Reconciled {
  workflowId: string;
  root: string;
  n: number;
  childForkId: string | undefined;
}

/** Records the unledgered forks found; a repeat or a racing writer is a no-op (ON CONFLICT DO NOTHING). */
export async function reconcileForkLedger(db: Db, applicationName: string, o: ReconcileOptions): Promise<Reconciled[]> {
  const found = await findUnledgeredForks(db, applicationName, {
    workflowIds: o.workflowIds,
    createdSince: o.createdSince,
    limit: o.limit ?? 200,
  });
  const out: Reconciled[] = [];
  for (const f of found) {
    const d = parseDivergence(f.sourceError);
    // The SQL only prefilters; a source that did not diverge was not forked by the planner.
    if (!d) continue;
    if (!o.dryRun) {
      await recordFork(db, {
        applicationName,
        root: f.root,
        n: f.n,
        source: f.source,
        fromStep: f.fromStep,
        newWorkflowId: f.workflowId,
        applicationVersion: f.applicationVersion,
        // As the planner decides: the error names the source itself, or a child it awaited.
        reason: d.workflowId === f.source ? 'diverged' : 'child-diverged',
        divergedWorkflowId: d.workflowId,
        detail: d.message,
        forkedBy: RECONCILED_BY,
        childForkId: f.childForkId,
      });
    }
    out.push({ workflowId: f.workflowId, root: f.root, n: f.n, childForkId: f.childForkId });
  }
  return out;
}
