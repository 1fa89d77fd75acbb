import { hostname } from 'node:os';
import { claimRewind, markRewound, type RewindReason, type RewoundDescendant, rewindsOf } from '../../db/queries/rewinds.js';
import { outsideRewindCheck } from '../../dbos/dataSourceCheckpoints.js';
import { type ForkClient, lineageOf, type Logger, noFaults, type QueueTarget } from '../../../packages/executor/src/plane/index.js';
import type { RepairDeps } from './deps.js';
import { type Busy, type DeadLettered, deadLetter, underRootLock } from './ledger.js';

/**
 * The rewind primitive: workflows rewound in place (DBOS's `rewindWorkflow`) under their own IDs, from the
 * cuts a situation planned. What it decides is only whether it may: the data-source check (a transaction
 * at or past a cut that only the app's in-process rewind could remove) and the budget; when it may not, it
 * says why (`fallback`) and the situation forks instead.
 *
 * Bounds and fences: rewinds and forks share MAX_REPAIRS per lineage, then the existing dead letter. The
 * ledger row (root, n, ending) is written first and claimed by one repairer; each workflow is rewound
 * only while it still shows the ending the plan was made from (status and completed_at re-read just
 * before, and DBOS's rewind re-checks the status in its own transaction), so a retry after a crash
 * finishes what is left and a repeat or a racing repairer rewinds nothing twice.
 */
export const DEFAULT_REWIND_CLAIM_MS = 120_000;

export interface Target {
  workflowId: string;
  /** The terminal status the plan saw; the rewind happens only while the workflow still shows it. */
  status: 'ERROR' | 'CANCELLED';
  fromStep: number;
  incarnationMs: number;
  queue: QueueTarget;
  applicationVersion: string | undefined;
}

/** A rewind repair as a situation planned it: the workflows to rewind, deepest first, and why. */
export interface RewindPlan {
  targets: Target[];
  reason: RewindReason;
  divergedWorkflowId: string | undefined;
  detail: string;
  forkedFrom: string | undefined;
  /** Cut right after the last recorded step, replayed by the same code (stuck): see outsideRewindCheck. */
  samePath?: boolean;
}

export interface Rewound {
  outcome: 'rewound' | 'already-rewound';
  workflowId: string;
  root: string;
  n: number;
  startStep: number;
  reason: RewindReason;
  rewound: string[];
}

/**
 * The part of every rewind repair after planning: the lineage's budget (forks + rewinds, then the dead
 * letter), the data-source check, the root lock, the ledger claim, the rewinds. `fallback` says why the
 * caller should fork instead.
 */
export async function rewindPlanned(
  deps: RepairDeps,
  client: ForkClient,
  log: Logger,
  plan: RewindPlan,
): Promise<Rewound | DeadLettered | Busy | { fallback: string; priorRewinds: number }> {
  const top = plan.targets.at(-1);
  if (!top) return { fallback: 'nothing to rewind', priorRewinds: 0 };
  const { root, depth } = await lineageOf(client, top.workflowId, plan.forkedFrom);
  const priorRewinds = await rewindsOf(deps.db, root, { workflowId: top.workflowId, incarnationMs: top.incarnationMs });
  const unsafe = await dataSourceRewindCheck(deps, log, plan.targets, plan.samePath === true);
  if (unsafe) return { fallback: unsafe, priorRewinds };
  const done = await underRootLock(deps, root, async (): Promise<Rewound | DeadLettered | Busy> => {
    if (depth + priorRewinds >= deps.maxForks) {
      return deadLetter(
        deps,
        { workflowId: top.workflowId, root, forks: depth + priorRewinds, reason: plan.reason, error: plan.detail },
        log,
      );
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
  deps: RepairDeps,
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
  deps: RepairDeps,
  client: ForkClient,
  log: Logger,
  p: { root: string; depth: number; plan: RewindPlan; top: Target },
): Promise<Rewound | Busy> {
  const faults = deps.faults ?? noFaults;
  const { root, plan, top } = p;
  const planned: RewoundDescendant[] = plan.targets
    .slice(0, -1)
    .map((t) => ({ workflowId: t.workflowId, fromStep: t.fromStep, incarnationMs: t.incarnationMs }));
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
    ...claim.descendants.map((d) => ({
      ...(byId.get(d.workflowId) ?? { status: 'ERROR' as const, queue: {}, applicationVersion: top.applicationVersion }),
      ...d,
    })),
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
