import { forkWouldReapply } from '../dbos/dataSourceCheckpoints.js';
import { deadLetter, type ForkDeps, ledger, underRootLock } from './autoFork.js';
import { forkId, forkOnce, type ForkPlan, lineageOf, queueOf, targetVersionOf } from './plan.js';

/**
 * The "fork" half of the reaper's cancel-and-fork: a workflow stuck on a live executor (claimed by a
 * process without its function, or wedged in a step) was cancelled by the reaper's conditional statement;
 * this starts its lineage again from after its last checkpoint, onto the configured target version (the
 * latest by default, which is where a missing function would be found). Same deterministic IDs, budget,
 * lock and ledger as autoFork, so a retried tick finds the fork already made.
 *
 * Only a CANCELLED workflow is forked: the reaper's cancel is the fence that guarantees the original's
 * run has stopped (it parks at its next checkpoint), so two lineages never both record outcomes.
 */
export async function forkStuck(deps: ForkDeps, workflowId: string): Promise<string | undefined> {
  const client = await deps.dbos();
  const status = await client.getWorkflow(workflowId);
  if (status?.status !== 'CANCELLED') return undefined;
  const steps = (await client.listWorkflowSteps(workflowId)) ?? [];
  const startStep = steps.reduce((m, s) => Math.max(m, s.functionID + 1), 0);
  const { root, depth } = await lineageOf(client, workflowId, status.forkedFrom);
  const n = depth + 1;
  const log = deps.logger.child({ component: 'fork', workflowId, root });
  const refused = await forkWouldReapply(deps.db, deps.dataSourceSchemas ?? [], workflowId, startStep);
  if (refused) {
    log.error('stuck workflow left cancelled: a fork would re-apply a transaction', { event: 'repair_refused', why: refused });
    return undefined;
  }
  const out = await underRootLock(deps, root, async () => {
    if (n > deps.maxForks) {
      await deadLetter(deps, { workflowId, root, forks: n - 1, reason: 'stuck', error: undefined }, log);
      return undefined;
    }
    const plan: ForkPlan = {
      source: workflowId,
      root,
      n,
      newWorkflowId: forkId(root, n),
      startStep,
      applicationVersion: await targetVersionOf(client, deps.targetVersion, status.applicationVersion),
      queue: queueOf(status),
      reason: 'stuck',
      divergedWorkflowId: undefined,
      detail: `no activity on executor ${status.executorId ?? '(unknown)'}; cancelled by the reaper`,
    };
    // Ledger first (an intent, as in autoFork): a crash after the fork must not leave it unrecorded.
    await ledger(deps, plan);
    const outcome = await forkOnce(client, plan);
    log.notice('stuck workflow forked', { event: 'fork', reason: 'stuck', newWorkflowId: plan.newWorkflowId, startStep, outcome });
    return plan.newWorkflowId;
  });
  return out === 'busy' ? undefined : out;
}
