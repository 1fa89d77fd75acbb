import type { Config } from '../../config/index.js';
import { forkWouldReapply } from '../../dbos/dataSourceCheckpoints.js';
import type { RepairDeps } from '../primitives/deps.js';
import {
  forkId,
  forkOnce,
  type ForkPlan,
  lineageOf,
  queueOf,
  stepAfterLastCheckpoint,
  targetVersionOf,
} from '../../../packages/executor/src/plane/index.js';
import { deadLetter, ledger, underRootLock } from '../primitives/ledger.js';
import { rewindPlanned } from '../primitives/rewind.js';

/**
 * A workflow stuck on a live executor (claimed by a process without its function, or wedged in a step)
 * that the reaper cancelled by its conditional statement: the cancel is the fence that stops the original
 * run at its next checkpoint, so two runs never both record outcomes. Only a CANCELLED workflow is
 * repaired. It goes on from after its last checkpoint, onto FORK_TARGET_VERSION (the latest by default,
 * where a missing function would be found), with the same ledger, budget and data-source check as a
 * diverged repair, so a retried tick finds the repair already made.
 *
 * repairStuck is the one place that chooses: STUCK_POLICY=cancel-and-repair rewinds it under its own ID
 * (a fork where rewind cannot do it, or under REPAIR_MODE=fork); cancel-and-fork always forks. Returns the
 * ID the work goes on under (the workflow's own after a rewind), or undefined when nothing was repaired.
 */
export async function repairStuck(
  deps: RepairDeps,
  workflowId: string,
  policy: Config['reaper']['stuckPolicy'],
): Promise<string | undefined> {
  if (policy !== 'cancel-and-repair' || (deps.repairMode ?? 'rewind') === 'fork') return forkStuck(deps, workflowId);
  const log = deps.logger.child({ component: 'repair', workflowId, reason: 'stuck' });
  const client = await deps.dbos();
  const fallBack = (why: string) => {
    log.notice('repairing by fork instead of rewind', { event: 'repair_fork_fallback', why });
    return forkStuck(deps, workflowId);
  };
  if (typeof client.rewindWorkflow !== 'function') return fallBack('this DBOS client has no rewindWorkflow (it is in 5.2.11 and later)');
  const status = await client.getWorkflow(workflowId);
  if (status?.status !== 'CANCELLED' || status.completedAt === undefined) return undefined;
  const fromStep = await stepAfterLastCheckpoint(client, workflowId);
  const done = await rewindPlanned(deps, client, log, {
    samePath: true,
    targets: [
      {
        workflowId,
        status: 'CANCELLED',
        fromStep,
        incarnationMs: status.completedAt,
        queue: queueOf(status),
        applicationVersion: await targetVersionOf(client, deps.targetVersion, status.applicationVersion),
      },
    ],
    reason: 'stuck',
    divergedWorkflowId: undefined,
    detail: `no activity on executor ${status.executorId ?? '(unknown)'}; cancelled by the reaper`,
    forkedFrom: status.forkedFrom,
  });
  if ('fallback' in done) return fallBack(done.fallback);
  return done.outcome === 'rewound' || done.outcome === 'already-rewound' ? workflowId : undefined;
}

/** The fork way: the lineage started again from after the last checkpoint, under its next fork ID. */
async function forkStuck(deps: RepairDeps, workflowId: string): Promise<string | undefined> {
  const client = await deps.dbos();
  const status = await client.getWorkflow(workflowId);
  if (status?.status !== 'CANCELLED') return undefined;
  const startStep = await stepAfterLastCheckpoint(client, workflowId);
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
    // Ledger first (an intent): a crash after the fork must not leave it unrecorded.
    await ledger(deps, plan);
    const outcome = await forkOnce(client, plan);
    log.notice('stuck workflow forked', { event: 'fork', reason: 'stuck', newWorkflowId: plan.newWorkflowId, startStep, outcome });
    return plan.newWorkflowId;
  });
  return out === 'busy' ? undefined : out;
}
