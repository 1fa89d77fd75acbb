import { executePlan, type ForkPlan, InvalidInputError, noFaults } from '../../../packages/executor/src/plane/index.js';
import { planDivergenceFork, type Planned } from '../../../packages/executor/src/plane/situations.js';
import type { RepairDeps } from '../primitives/deps.js';
import { type Busy, type DeadLettered, deadLetter, ledger, underRootLock } from '../primitives/ledger.js';
import { reconcileForkLedger } from '../primitives/reconcile.js';

/**
 * A diverged workflow repaired by a fork: the bounded, deterministic escape from replay divergence (the
 * fork ID is derived from the lineage root and the fork number, so a repeat hits DBOS's primary key and
 * counts as "already forked"). repairDiverged (diverged.ts) chooses it under REPAIR_MODE=fork or when a
 * rewind cannot do the job; `afterlife-plane fork` asks for it by name.
 */
export type AutoForkResult =
  | {
      outcome: 'forked' | 'already-forked';
      workflowId: string;
      newWorkflowId: string;
      root: string;
      n: number;
      startStep: number;
      reason: ForkPlan['reason'];
    }
  | DeadLettered
  | Busy
  | { outcome: 'skipped'; workflowId: string; why: 'missing' | 'not-diverged' | 'not-forkable'; status: string | undefined };

export interface ForkPointOptions {
  /**
   * An operator's fork point (`afterlife-plane fork --from-step N`) instead of the first divergent step. Only
   * earlier steps are accepted: a fork that copies the divergent checkpoint diverges again.
   */
  fromStep?: number;
  /** Rewinds the lineage already had (the rewind ledger), when a rewind repair falls back to a fork. */
  priorRewinds?: number;
}

export async function autoFork(deps: RepairDeps, workflowId: string, opts: ForkPointOptions = {}): Promise<AutoForkResult> {
  const faults = deps.faults ?? noFaults;
  const log = deps.logger.child({ workflowId, component: 'fork' });
  const client = await deps.dbos();
  // Forks up this workflow's chain that the ledger lacks (made by the app helper) are recorded first, so
  // the lineage's rows are complete when this call adds the next; bookkeeping only, so it never blocks the fork.
  await reconcileForkLedger(deps.db, deps.applicationName, { workflowIds: [workflowId] }).catch((err: unknown) =>
    log.warn('fork ledger reconciliation failed; the reaper retries it', { err }),
  );
  const planned = withFromStep(
    await planDivergenceFork(client, workflowId, {
      maxForks: deps.maxForks,
      targetVersion: deps.targetVersion,
      ...(opts.priorRewinds ? { priorRewinds: opts.priorRewinds } : {}),
    }),
    opts.fromStep,
  );
  if (planned.kind === 'skip') {
    if (planned.why === 'not-forkable')
      log.warn('diverged but not forkable; left for a human', { detail: planned.detail, event: 'fork_skipped' });
    return { outcome: 'skipped', workflowId, why: planned.why, status: planned.status };
  }
  const root = planned.kind === 'fork' ? planned.plan.root : planned.root;
  const done = await underRootLock(deps, root, async (): Promise<AutoForkResult> => {
    if (planned.kind === 'exhausted')
      return deadLetter(deps, { workflowId, root, forks: planned.n - 1, reason: 'diverged', error: planned.detail }, log);
    const plan = planned.plan;
    // The ledger row first, as an intent: written after the fork, a crash in between would leave a fork
    // (and a fresh child) the ledger never hears of. An intent whose fork was never made is harmless: the
    // source is still diverged and not forked, so the next pass plans the same root, n and ID and makes it.
    await ledger(deps, plan);
    if (faults.enabled) await faults.hit('fork.beforeFork', { workflowId, newWorkflowId: plan.newWorkflowId });
    const outcome = await executePlan(client, plan);
    log.notice(outcome === 'forked' ? 'diverged workflow forked' : 'diverged workflow was already forked', {
      event: 'fork',
      outcome,
      root,
      n: plan.n,
      newWorkflowId: plan.newWorkflowId,
      startStep: plan.startStep,
      reason: plan.reason,
      divergedWorkflowId: plan.divergedWorkflowId,
      applicationVersion: plan.applicationVersion,
    });
    return { outcome, workflowId, newWorkflowId: plan.newWorkflowId, root, n: plan.n, startStep: plan.startStep, reason: plan.reason };
  });
  return done === 'busy' ? { outcome: 'busy', workflowId, root } : done;
}

function withFromStep(planned: Planned, fromStep: number | undefined): Planned {
  if (fromStep === undefined || planned.kind !== 'fork') return planned;
  const { plan } = planned;
  if (plan.child) {
    throw new InvalidInputError(`${plan.source} diverged in a child it started under its own ID; fork it without --from-step`);
  }
  if (fromStep > plan.startStep) {
    throw new InvalidInputError(
      `--from-step ${fromStep} is past the first divergent step ${plan.startStep} of ${plan.source}: the fork would copy the divergent checkpoint and diverge again`,
    );
  }
  return { kind: 'fork', plan: { ...plan, startStep: fromStep } };
}
