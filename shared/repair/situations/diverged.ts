import { rewindsOf } from '../../db/queries/rewinds.js';
import { divergenceOf, type ForkClient, lineageOf, queueOf, targetVersionOf } from '../../../packages/executor/src/plane/index.js';
import type { RepairDeps } from '../primitives/deps.js';
import { type RewindPlan, rewindPlanned, type Rewound, type Target } from '../primitives/rewind.js';
import { autoFork, type AutoForkResult } from './divergedFork.js';

/**
 * A diverged workflow (DBOSUnexpectedStepError, code 26), repaired in place: rewound from its divergent
 * step, it runs again under its own ID, so `retrieveWorkflow(id)`, `send`/`getEvent`, streams and dedup
 * keys keep pointing at the live work. A parent that failed because a descendant diverged is repaired
 * bottom-up: the descendant rewound from its divergent step, then each ancestor from the `DBOS.getResult`
 * step that awaited the one below. Rewinding the parent first would replay its await against a child
 * still in ERROR and fail again at once; rewinding it from the child's start step would only re-attach to
 * the same child (DBOS starts a child whose ID exists by attaching to it), so the await is the cut.
 *
 * A fork is made instead (divergedFork.ts), saying why, when rewind cannot do the job: REPAIR_MODE=fork; a
 * DBOS without `rewindWorkflow` (older than the supported 5.2.11); data-source checkpoints at or past a cut
 * (see shared/dbos/dataSourceCheckpoints.ts: only the app's in-process rewind removes them); a lineage
 * whose shape a rewind cannot follow. repairDiverged is the one place that chooses.
 */
export type RepairResult = AutoForkResult | Rewound;

type Plan =
  | ({ kind: 'rewind' } & RewindPlan)
  | { kind: 'skip'; why: 'missing' | 'not-diverged'; status: string | undefined }
  | { kind: 'fork'; why: string };

/** The reaper's (and `afterlife` CLI's) repair of a diverged workflow: rewind by default, fork when it must. */
export async function repairDiverged(deps: RepairDeps, workflowId: string): Promise<RepairResult> {
  const log = deps.logger.child({ workflowId, component: 'repair' });
  if ((deps.repairMode ?? 'rewind') === 'fork') return autoFork(deps, workflowId);
  const client = await deps.dbos();
  const fallBack = async (why: string, priorRewinds = 0): Promise<RepairResult> => {
    log.notice('repairing by fork instead of rewind', { event: 'repair_fork_fallback', why });
    return autoFork(deps, workflowId, priorRewinds ? { priorRewinds } : {});
  };
  if (typeof client.rewindWorkflow !== 'function') return fallBack('this DBOS client has no rewindWorkflow (it is in 5.2.11 and later)');
  const plan = await planRewind(client, workflowId, deps);
  if (plan.kind === 'skip') return { outcome: 'skipped', workflowId, why: plan.why, status: plan.status };
  if (plan.kind === 'fork') {
    const { root } = await lineageOf(client, workflowId, (await client.getWorkflow(workflowId))?.forkedFrom);
    return fallBack(plan.why, await rewindsOf(deps.db, root));
  }
  const done = await rewindPlanned(deps, client, log, plan);
  return 'fallback' in done ? fallBack(done.fallback, done.priorRewinds) : done;
}

const AWAIT_STEP = 'DBOS.getResult';

/** The rewinds that repair `workflowId`'s divergence, deepest first; or why a fork (or nothing) is due. */
async function planRewind(client: ForkClient, workflowId: string, deps: RepairDeps): Promise<Plan> {
  const status = await client.getWorkflow(workflowId);
  if (!status) return { kind: 'skip', why: 'missing', status: undefined };
  if (status.status !== 'ERROR') return { kind: 'skip', why: 'not-diverged', status: status.status };
  const d = divergenceOf(status.error);
  if (!d) return { kind: 'skip', why: 'not-diverged', status: status.status };
  const version = (s: { applicationVersion?: string | undefined }) => targetVersionOf(client, deps.targetVersion, s.applicationVersion);
  const top: Target = {
    workflowId,
    status: 'ERROR',
    fromStep: d.stepId,
    incarnationMs: status.completedAt ?? -1,
    queue: queueOf(status),
    applicationVersion: await version(status),
  };
  if (status.completedAt === undefined) return { kind: 'fork', why: `${workflowId} ended ERROR without completed_at` };
  if (d.workflowId === workflowId) {
    return {
      kind: 'rewind',
      targets: [top],
      reason: 'diverged',
      divergedWorkflowId: d.workflowId,
      detail: d.message,
      forkedFrom: status.forkedFrom,
    };
  }
  // Up from the diverged descendant through parent_workflow_id; each parent is cut at the step that awaited the one below.
  const chain: Target[] = [];
  let below = await client.getWorkflow(d.workflowId);
  if (below?.status !== 'ERROR' || below.completedAt === undefined)
    return { kind: 'fork', why: `diverged descendant ${d.workflowId} is ${below?.status ?? 'missing'}` };
  chain.push({
    workflowId: d.workflowId,
    status: 'ERROR',
    fromStep: d.stepId,
    incarnationMs: below.completedAt,
    queue: queueOf(below),
    applicationVersion: await version(below),
  });
  for (let hops = 0; hops < 100; hops++) {
    const parentId: string | undefined = below.parentWorkflowID;
    if (!parentId) return { kind: 'fork', why: `${d.workflowId} is not a descendant of ${workflowId} (awaited, not started, by it)` };
    const steps = (await client.listWorkflowSteps(parentId)) ?? [];
    const awaited = steps
      .filter((s) => s.childWorkflowID === below?.workflowID && s.name === AWAIT_STEP)
      .sort((a, b) => a.functionID - b.functionID)[0];
    if (!awaited) return { kind: 'fork', why: `${parentId} has no recorded await of ${below.workflowID}` };
    if (parentId === workflowId) {
      chain.push({ ...top, fromStep: awaited.functionID });
      return {
        kind: 'rewind',
        targets: chain,
        reason: 'child-diverged',
        divergedWorkflowId: d.workflowId,
        detail: d.message,
        forkedFrom: status.forkedFrom,
      };
    }
    const parent = await client.getWorkflow(parentId);
    if (parent?.status !== 'ERROR' || parent.completedAt === undefined)
      return { kind: 'fork', why: `intermediate parent ${parentId} is ${parent?.status ?? 'missing'}` };
    chain.push({
      workflowId: parentId,
      status: 'ERROR',
      fromStep: awaited.functionID,
      incarnationMs: parent.completedAt,
      queue: queueOf(parent),
      applicationVersion: await version(parent),
    });
    below = parent;
  }
  return { kind: 'fork', why: `${workflowId} is more than 100 levels above ${d.workflowId}` };
}
