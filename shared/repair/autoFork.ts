import { hostname } from 'node:os';
import type { Db } from '../db/pool.js';
import { InvalidInputError } from '../errors.js';
import { claimDeadLetter, markDeadLetterPublished, recordFork } from '../db/queries/forks.js';
import { publishDeadLetter } from '../events/deadLetter.js';
import type { Publisher } from '../events/publisher.js';
import { LockContendedError, LockUnavailableError } from '../lock/errors.js';
import type { RedisLock } from '../lock/lock.js';
import type { Logger } from '../log.js';
import { noFaults, type Faults } from '../testing/faults.js';
import { reconcileForkLedger } from './reconcile.js';
import { executePlan, type ForkClient, type ForkPlan, type Planned, planDivergenceFork, type TargetVersion } from './plan.js';

/**
 * autoFork: the bounded, deterministic escape from replay divergence. Postgres is the fence (the fork ID
 * is derived from the lineage root and the fork number, so a repeat hits DBOS's primary key and counts as
 * "already forked"; the dead letter is one row per root); the Redis lock per root only saves the work of
 * racing callers (reaper ticks, a second reaper, the app helper) and is skipped, logged, when Redis is down.
 */
export interface ForkDeps {
  db: Db;
  /** DBOS's own client, created on first use; each call borrows a connection and gives it back. */
  dbos: () => Promise<ForkClient>;
  lock: RedisLock | undefined;
  publisher: Publisher | undefined;
  logger: Logger;
  faults?: Faults;
  applicationName: string;
  deadLetterTopic: string;
  maxForks: number;
  targetVersion: TargetVersion;
  /** REPAIR_MODE: rewind in place (DBOSClient.rewindWorkflow, in 5.2.11 and 5.3.0) or fork. */
  repairMode?: 'rewind' | 'fork';
  /** Schemas holding DBOS data-source checkpoints (transaction_completion) afterlife can read. */
  dataSourceSchemas?: readonly string[];
  /** A rewind claim older than this whose rewind never happened (its claimer died) may be taken over. */
  rewindClaimMs?: number;
  lockTtlMs: number;
  keyPrefix?: string;
  /** Who forks, for the ledger. */
  forkedBy?: string;
  /** A dead letter whose publish claim is older than this may be re-published by a retry. */
  deadLetterClaimMs?: number;
}

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
  | { outcome: 'dead-lettered'; workflowId: string; root: string; forks: number; published: boolean }
  | { outcome: 'busy'; workflowId: string; root: string }
  | { outcome: 'skipped'; workflowId: string; why: 'missing' | 'not-diverged' | 'not-forkable'; status: string | undefined };

export const forkLockKey = (deps: Pick<ForkDeps, 'keyPrefix' | 'applicationName'>, root: string) =>
  `${deps.keyPrefix ?? 'afterlife'}:${deps.applicationName}:fork:${root}`;

/**
 * Runs `fn` under the root's lock; 'busy' when another worker holds it (it is doing this very work).
 * Without Redis, or when Redis is unreachable, runs unlocked: the primary keys still allow one fork.
 */
export async function underRootLock<T>(deps: ForkDeps, root: string, fn: () => Promise<T>): Promise<T | 'busy'> {
  if (!deps.lock) return fn();
  try {
    return await deps.lock.using(forkLockKey(deps, root), deps.lockTtlMs, () => fn());
  } catch (err) {
    if (err instanceof LockContendedError) return 'busy';
    if (!(err instanceof LockUnavailableError)) throw err;
    deps.logger.warn('redis unavailable: forking without the lock (degraded); primary keys still fence', { root, err });
    return fn();
  }
}

export interface ForkPointOptions {
  /**
   * An operator's fork point (`afterlife fork --from-step N`) instead of the first divergent step. Only
   * earlier steps are accepted: a fork that copies the divergent checkpoint diverges again.
   */
  fromStep?: number;
  /** Rewinds the lineage already had (the rewind ledger), when a rewind repair falls back to a fork. */
  priorRewinds?: number;
}

export async function autoFork(deps: ForkDeps, workflowId: string, opts: ForkPointOptions = {}): Promise<AutoForkResult> {
  const faults = deps.faults ?? noFaults;
  const log = deps.logger.child({ workflowId, component: 'fork' });
  const client = await deps.dbos();
  // Forks up this workflow's chain that the ledger lacks (made by the app helper) are recorded first, so
  // the lineage's rows are complete when this call adds the next; bookkeeping only, so it never blocks the fork.
  await reconcileForkLedger(deps.db, deps.applicationName, { workflowIds: [workflowId] }).catch((err: unknown) =>
    log.warn('fork ledger reconciliation failed; the reaper retries it', { err }),
  );
  const planned = withFromStep(await planDivergenceFork(client, workflowId, {
      maxForks: deps.maxForks,
      targetVersion: deps.targetVersion,
      ...(opts.priorRewinds ? { priorRewinds: opts.priorRewinds } : {}),
    }), opts.fromStep);
  if (planned.kind === 'skip') {
    if (planned.why === 'not-forkable') log.warn('diverged but not forkable; left for a human', { detail: planned.detail, event: 'fork_skipped' });
    return { outcome: 'skipped', workflowId, why: planned.why, status: planned.status };
  }
  const root = planned.kind === 'fork' ? planned.plan.root : planned.root;
  const done = await underRootLock(deps, root, async (): Promise<AutoForkResult> => {
    if (planned.kind === 'exhausted') return deadLetter(deps, { workflowId, root, forks: planned.n - 1, reason: 'diverged', error: planned.detail }, log);
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

export function ledger(deps: ForkDeps, plan: ForkPlan, awaitedBy?: string): Promise<void> {
  return recordFork(deps.db, {
    applicationName: deps.applicationName,
    root: plan.root,
    n: plan.n,
    source: plan.source,
    fromStep: plan.startStep,
    newWorkflowId: plan.newWorkflowId,
    applicationVersion: plan.applicationVersion,
    reason: plan.reason,
    divergedWorkflowId: plan.divergedWorkflowId,
    detail: plan.detail,
    forkedBy: deps.forkedBy ?? `${hostname()}:${process.pid}`,
    childForkId: plan.child?.newWorkflowId,
    awaitedBy,
  });
}

/** One dead letter per root: the row, then one message from whoever claimed it. */
export async function deadLetter(
  deps: ForkDeps,
  d: { workflowId: string; root: string; forks: number; reason: string; error: string | undefined },
  log: Logger,
): Promise<AutoForkResult> {
  const row = await claimDeadLetter(deps.db, {
    applicationName: deps.applicationName,
    root: d.root,
    workflowId: d.workflowId,
    forks: d.forks,
    reason: d.reason,
    error: d.error,
    staleClaimMs: deps.deadLetterClaimMs ?? 60_000,
  });
  if (!row) return { outcome: 'dead-lettered', workflowId: d.workflowId, root: d.root, forks: d.forks, published: false };
  log.error('fork budget exhausted: lineage dead-lettered', { event: 'dead_letter', root: d.root, forks: d.forks, maxForks: deps.maxForks });
  if (!deps.publisher) {
    log.warn('no publisher: the dead letter is recorded but not published', { root: d.root });
    return { outcome: 'dead-lettered', workflowId: d.workflowId, root: d.root, forks: d.forks, published: false };
  }
  const messageId = await publishDeadLetter(deps.publisher, deps.deadLetterTopic, {
    applicationName: deps.applicationName,
    rootWorkflowId: d.root,
    workflowId: d.workflowId,
    forks: d.forks,
    reason: d.reason,
    ...(d.error ? { error: d.error } : {}),
    deadAt: row.created_at.toISOString(),
  });
  await markDeadLetterPublished(deps.db, d.root, messageId);
  return { outcome: 'dead-lettered', workflowId: d.workflowId, root: d.root, forks: d.forks, published: true };
}
