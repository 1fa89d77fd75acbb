import type { ForkDeps } from './autoFork.js';
import { queueOf, targetVersionOf } from './plan.js';
import { rewindPlanned } from './rewind.js';
import { forkStuck } from './stuck.js';

/**
 * STUCK_POLICY=cancel-and-repair: the reaper cancelled a workflow stuck on a live executor (its
 * conditional cancel is the fence that stops the original run at its next checkpoint); this rewinds it
 * under its own ID from after its last checkpoint, onto FORK_TARGET_VERSION (the latest by default,
 * where a missing function would be found). The same ledger, claim, budget and data-source check as a
 * diverged rewind; a fork (forkStuck) where rewind cannot do it. Returns the ID the work goes on under
 * (the workflow's own after a rewind), or undefined when nothing was repaired this time.
 */
export async function repairStuck(deps: ForkDeps, workflowId: string): Promise<string | undefined> {
  if ((deps.repairMode ?? 'rewind') === 'fork') return forkStuck(deps, workflowId);
  const log = deps.logger.child({ component: 'repair', workflowId, reason: 'stuck' });
  const client = await deps.dbos();
  const fallBack = (why: string) => {
    log.notice('repairing by fork instead of rewind', { event: 'repair_fork_fallback', why });
    return forkStuck(deps, workflowId);
  };
  if (typeof client.rewindWorkflow !== 'function') return fallBack('this DBOS client has no rewindWorkflow (it is in 5.2.11 and later)');
  const status = await client.getWorkflow(workflowId);
  if (status?.status !== 'CANCELLED' || status.completedAt === undefined) return undefined;
  const steps = (await client.listWorkflowSteps(workflowId)) ?? [];
  const fromStep = steps.reduce((m, s) => Math.max(m, s.functionID + 1), 0);
  const done = await rewindPlanned(deps, client, log, {
    kind: 'rewind',
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
