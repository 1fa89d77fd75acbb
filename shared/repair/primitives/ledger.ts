import { hostname } from 'node:os';
import { claimDeadLetter, markDeadLetterPublished, recordFork } from '../../db/queries/forks.js';
import { publishDeadLetter } from '../../events/deadLetter.js';
import { LockContendedError, LockUnavailableError } from '../../lock/errors.js';
import type { ForkPlan, Logger } from '../../../packages/executor/src/plane/index.js';
import { redisKey } from '../../../packages/executor/src/plane/index.js';
import type { RepairDeps } from './deps.js';

/**
 * The ledger and its budget, shared by every repair. Postgres is the fence: a fork's row is written first
 * as an intent, the dead letter is one row per root once MAX_REPAIRS is spent (the rewind ledger's rows
 * are claimed in shared/db/queries/rewinds.ts, see rewind.ts). The Redis lock per root only saves the work
 * of racing callers (reaper ticks, a second reaper, the app helper) and is skipped, logged, when Redis is down.
 */
export interface DeadLettered {
  outcome: 'dead-lettered';
  workflowId: string;
  root: string;
  forks: number;
  published: boolean;
}

/** Another repairer holds the root's lock: it is doing this very work. */
export interface Busy {
  outcome: 'busy';
  workflowId: string;
  root: string;
}

export const forkLockKey = (deps: Pick<RepairDeps, 'keyPrefix' | 'applicationName'>, root: string) =>
  redisKey(deps.keyPrefix, deps.applicationName, 'fork', root);

/**
 * Runs `fn` under the root's lock; 'busy' when another worker holds it (it is doing this very work).
 * Without Redis, or when Redis is unreachable, runs unlocked: the primary keys still allow one fork.
 */
export async function underRootLock<T>(deps: RepairDeps, root: string, fn: () => Promise<T>): Promise<T | 'busy'> {
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

/** A fork's row in the ledger, written before the fork as an intent (see the situations that fork). */
export function ledger(deps: RepairDeps, plan: ForkPlan, awaitedBy?: string): Promise<void> {
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
  deps: RepairDeps,
  d: { workflowId: string; root: string; forks: number; reason: string; error: string | undefined },
  log: Logger,
): Promise<DeadLettered> {
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
  log.error('fork budget exhausted: lineage dead-lettered', {
    event: 'dead_letter',
    root: d.root,
    forks: d.forks,
    maxForks: deps.maxForks,
  });
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
