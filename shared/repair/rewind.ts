import { hostname } from 'node:os';
import { claimRewind, markRewound, type RewindReason, type RewoundDescendant, rewindsOf } from '../db/queries/rewinds.js';
import { outsideRewindCheck } from '../dbos/dataSourceCheckpoints.js';
import type { Logger } from '../log.js';
import { noFaults } from '../testing/faults.js';
import { autoFork, type AutoForkResult, deadLetter, type ForkDeps, underRootLock } from './autoFork.js';
import { divergenceOf } from '../dbos/divergence.js';
import { type ForkClient, lineageOf, queueOf, type QueueTarget, targetVersionOf } from './plan.js';

/**
 * Repair in place: a diverged workflow is rewound (DBOS 5.3's `rewindWorkflow`) from its divergent step
 * and runs again under its own ID, so `retrieveWorkflow(id)`, `send`/`getEvent`, streams and dedup keys
 * keep pointing at the live work. A parent that failed because a descendant diverged is repaired
 * bottom-up: the descendant rewound from its divergent step, then each ancestor from the `DBOS.getResult`
 * step that awaited the one below. Rewinding the parent first would replay its await against a child
 * still in ERROR and fail again at once; rewinding it from the child's start step would only re-attach to
 * the same child (DBOS starts a child whose ID exists by attaching to it), so the await is the cut.
 *
 * A fork is made instead, saying why, when rewind cannot do the job: REPAIR_MODE=fork; a DBOS without
 * `rewindWorkflow` (older than the supported 5.2.11); data-source checkpoints at or past a cut (see shared/dbos/dataSourceCheckpoints.ts:
 * only the app's in-process rewind removes them); a lineage whose shape a rewind cannot follow.
 *
 * Bounds and fences: rewinds and forks share MAX_REPAIRS per lineage, then the existing dead letter. The
 * ledger row (root, n, ending) is written first and claimed by one repairer; each workflow is rewound
 * only while it still shows the ending the plan was made from (status and completed_at re-read just
 * before, and DBOS's rewind re-checks the status in its own transaction), so a retry after a crash
 * finishes what is left and a repeat or a racing repairer rewinds nothing twice.
 */
export const DEFAULT_REWIND_CLAIM_MS = 120_000;

export type RepairResult =
  | AutoForkResult
  | { outcome: 'rewound' | 'already-rewound'; workflowId: string; root: string; n: number; startStep: number; reason: RewindReason; rewound: string[] };

export interface Target {
  workflowId: string;
  /** The terminal status the plan saw; the rewind happens only while the workflow still shows it. */
  status: 'ERROR' | 'CANCELLED';
  fromStep: number;
  incarnationMs: number;
  queue: QueueTarget;
  applicationVersion: string | undefined;
}

type Plan =
  | {
      kind: 'rewind';
      targets: Target[];
      reason: RewindReason;
      divergedWorkflowId: string | undefined;
      detail: string;
      forkedFrom: string | undefined;
      /** Cut right after the last recorded step, replayed by the same code (stuck): see outsideRewindCheck. */
      samePath?: boolean;
    }
  | { kind: 'skip'; why: 'missing' | 'not-diverged'; status: string | undefined }
  | { kind: 'fork'; why: string };

const AWAIT_STEP = 'DBOS.getResult';

/** The rewinds that repair `workflowId`'s divergence, deepest first; or why a fork (or nothing) is due. */
async function planRewind(client: ForkClient, workflowId: string, deps: ForkDeps): Promise<Plan> {
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
    return { kind: 'rewind', targets: [top], reason: 'diverged', divergedWorkflowId: d.workflowId, detail: d.message, forkedFrom: status.forkedFrom };
  }
  // Up from the diverged descendant through parent_workflow_id; each parent is cut at the step that awaited the one below.
  const chain: Target[] = [];
  let below = await client.getWorkflow(d.workflowId);
  if (below?.status !== 'ERROR' || below.completedAt === undefined) return { kind: 'fork', why: `diverged descendant ${d.workflowId} is ${below?.status ?? 'missing'}` };
  chain.push({ workflowId: d.workflowId, status: 'ERROR', fromStep: d.stepId, incarnationMs: below.completedAt, queue: queueOf(below), applicationVersion: await version(below) });
  for (let hops = 0; hops < 100; hops++) {
    const parentId: string | undefined = below.parentWorkflowID;
    if (!parentId) return { kind: 'fork', why: `${d.workflowId} is not a descendant of ${workflowId} (awaited, not started, by it)` };
    const steps = (await client.listWorkflowSteps(parentId)) ?? [];
    const awaited = steps.filter((s) => s.childWorkflowID === below?.workflowID && s.name === AWAIT_STEP).sort((a, b) => a.functionID - b.functionID)[0];
    if (!awaited) return { kind: 'fork', why: `${parentId} has no recorded await of ${below.workflowID}` };
    if (parentId === workflowId) {
      chain.push({ ...top, fromStep: awaited.functionID });
      return { kind: 'rewind', targets: chain, reason: 'child-diverged', divergedWorkflowId: d.workflowId, detail: d.message, forkedFrom: status.forkedFrom };
    }
    const parent = await client.getWorkflow(parentId);
    if (parent?.status !== 'ERROR' || parent.completedAt === undefined) return { kind: 'fork', why: `intermediate parent ${parentId} is ${parent?.status ?? 'missing'}` };
    chain.push({ workflowId: parentId, status: 'ERROR', fromStep: awaited.functionID, incarnationMs: parent.completedAt, queue: queueOf(parent), applicationVersion: await version(parent) });
    below = parent;
  }
  return { kind: 'fork', why: `${workflowId} is more than 100 levels above ${d.workflowId}` };
}

/** The reaper's (and `afterlife` CLI's) repair of a diverged workflow: rewind by default, fork when it must. */
export async function repairDiverged(deps: ForkDeps, workflowId: string): Promise<RepairResult> {
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

export type RewindPlan = Extract<Plan, { kind: 'rewind' }>;

/**
 * The part of every rewind repair after planning: the lineage's budget (forks + rewinds, then the dead
 * letter), the data-source check, the root lock, the ledger claim, the rewinds. `fallback` says why the
 * caller should fork instead.
 */
export async function rewindPlanned(
  deps: ForkDeps,
  client: ForkClient,
  log: Logger,
  plan: RewindPlan,
): Promise<RepairResult | { fallback: string; priorRewinds: number }> {
  const top = plan.targets.at(-1);
  if (!top) return { fallback: 'nothing to rewind', priorRewinds: 0 };
  const { root, depth } = await lineageOf(client, top.workflowId, plan.forkedFrom);
  const priorRewinds = await rewindsOf(deps.db, root, { workflowId: top.workflowId, incarnationMs: top.incarnationMs });
  const unsafe = await dataSourceRewindCheck(deps, log, plan.targets, plan.samePath === true);
  if (unsafe) return { fallback: unsafe, priorRewinds };
  const done = await underRootLock(deps, root, async (): Promise<RepairResult> => {
    if (depth + priorRewinds >= deps.maxForks) {
      return deadLetter(deps, { workflowId: top.workflowId, root, forks: depth + priorRewinds, reason: plan.reason, error: plan.detail }, log);
    }
    return rewindUnderClaim(deps, client, log, { root, depth, plan, top });
  });
  return done === 'busy' ? { outcome: 'busy', workflowId: top.workflowId, root } : done;
}

/**
 * The data-source check before an outside rewind (see outsideRewindCheck): why the caller must fork
 * instead, or undefined, having logged any unrecorded transaction the replay will be served.
 */
export async function dataSourceRewindCheck(
  deps: ForkDeps,
  log: Logger,
  cuts: ReadonlyArray<{ workflowId: string; fromStep: number }>,
  samePath: boolean,
): Promise<string | undefined> {
  const check = await outsideRewindCheck(deps.db, deps.dataSourceSchemas ?? [], cuts, samePath);
  if (check.unsafe !== undefined) return check.unsafe;
  const [first] = check.served;
  if (first) {
    log.notice('rewinding over a transaction the system database never recorded; the replay is served its checkpoint', {
      event: 'repair_rewind_serves_transaction',
      workflowId: first.workflowId,
      steps: check.served.map((c) => `${c.schema}.transaction_completion: step ${c.functionId}`),
      why: 'a fork would run it again under a new ID',
    });
  }
  return undefined;
}

async function rewindUnderClaim(
  deps: ForkDeps,
  client: ForkClient,
  log: Logger,
  p: { root: string; depth: number; plan: RewindPlan; top: Target },
): Promise<RepairResult> {
  const faults = deps.faults ?? noFaults;
  const { root, plan, top } = p;
  const planned: RewoundDescendant[] = plan.targets.slice(0, -1).map((t) => ({ workflowId: t.workflowId, fromStep: t.fromStep, incarnationMs: t.incarnationMs }));
  const claim = await claimRewind(
    deps.db,
    {
      applicationName: deps.applicationName,
      root,
      forksBefore: p.depth,
      workflowId: top.workflowId,
      incarnationMs: top.incarnationMs,
      fromStep: top.fromStep,
      applicationVersion: top.applicationVersion,
      reason: plan.reason,
      divergedWorkflowId: plan.divergedWorkflowId,
      detail: plan.detail,
      descendants: planned,
      rewoundBy: deps.forkedBy ?? `${hostname()}:${process.pid}`,
    },
    deps.rewindClaimMs ?? DEFAULT_REWIND_CLAIM_MS,
  );
  if (claim.kind === 'held' || claim.kind === 'raced') return { outcome: 'busy', workflowId: top.workflowId, root };
  const base = { workflowId: top.workflowId, root, startStep: top.fromStep, reason: plan.reason };
  if (claim.kind === 'done') return { outcome: 'already-rewound', ...base, n: claim.n, rewound: [] };
  // A taken-over claim follows the plan its first claimer recorded: some of it may be done already.
  const byId = new Map(plan.targets.map((t) => [t.workflowId, t]));
  const targets: Target[] = [
    ...claim.descendants.map((d) => ({ ...(byId.get(d.workflowId) ?? { status: 'ERROR' as const, queue: {}, applicationVersion: top.applicationVersion }), ...d })),
    top,
  ];
  const rewound: string[] = [];
  for (const t of targets) {
    if (faults.enabled) await faults.hit('rewind.beforeRewind', { workflowId: t.workflowId, root, n: claim.n });
    if (await rewindOne(client, t)) rewound.push(t.workflowId);
  }
  if (faults.enabled) await faults.hit('rewind.afterRewind', { workflowId: top.workflowId, root, n: claim.n });
  await markRewound(deps.db, top.workflowId, top.incarnationMs);
  const outcome = rewound.includes(top.workflowId) ? 'rewound' : 'already-rewound';
  log.notice(outcome === 'rewound' ? 'workflow rewound under its own ID' : 'workflow was already rewound', {
    event: 'rewind',
    outcome,
    root,
    n: claim.n,
    startStep: top.fromStep,
    reason: plan.reason,
    divergedWorkflowId: plan.divergedWorkflowId,
    rewound,
    takenOver: claim.takenOver,
  });
  return { outcome, ...base, n: claim.n, rewound };
}

/**
 * Rewinds one workflow if it still shows the ending the plan saw (status ERROR, same completed_at);
 * false when it moved on (rewound by an earlier attempt, or by a racer whose rewind DBOS let through first).
 */
async function rewindOne(client: ForkClient, t: Target): Promise<boolean> {
  const now = await client.getWorkflow(t.workflowId);
  if (now?.status !== t.status || now.completedAt !== t.incarnationMs) return false;
  if (!client.rewindWorkflow) return false;
  try {
    await client.rewindWorkflow(t.workflowId, {
      startStep: t.fromStep,
      ...t.queue,
      ...(t.applicationVersion !== undefined ? { applicationVersion: t.applicationVersion } : {}),
    });
    return true;
  } catch (err) {
    // DBOS's own re-check: the status moved between its read and its update, or it is no longer terminal.
    if (err instanceof Error && /changed status while being rewound|only a workflow in a terminal state/.test(err.message)) return false;
    throw err;
  }
}
