import { forkWouldReapply } from '../../dbos/dataSourceCheckpoints.js';
import { dropAbandonedForkIntent, markOriginalCancelled, type UncancelledOriginal, uncancelledOriginals } from '../../db/queries/forks.js';
import {
  errorMessage,
  type ForkClient,
  forkId,
  forkOnce,
  type ForkPlan,
  lineageOf,
  type Logger,
  queueOf,
} from '../../../packages/executor/src/plane/index.js';
import type { RepairDeps } from '../primitives/deps.js';
import { deadLetter, ledger, underRootLock } from '../primitives/ledger.js';
import type { OrphanInfo, OrphanOutcome } from './orphanOutcome.js';

/**
 * Orphaned-version rows repaired by forks (REPAIR_MODE=fork, or the rows a rewind could not take; the
 * choice is repairOrphaned's, orphaned.ts): each is forked onto the latest version from after its last
 * checkpoint, then the original is cancelled so that a later executor of the old version can never run a
 * second lineage. Same primitive, IDs, budget and ledger as every fork.
 *
 * Ledger row first, fork second, cancel third. The row (original not yet cancelled) is written before the
 * fork so that a crash at any point leaves something cancelForkedOriginals can see: after the fork, it
 * cancels the original; before it, it makes the fork from the row (the row holds the plan) and then
 * cancels. Cancelling first could lose the workflow. Children re-enqueued in the same batch are forked
 * before their parents, and a parent's copied child-start row is remapped to the child's fork so the
 * parent awaits the lineage that runs.
 */
type Exhausted = { exhausted: true; root: string; n: number };

/** The batch planned together, so parents can point at their children's deterministic fork IDs. */
interface OrphanForks {
  plans: Map<string, ForkPlan | Exhausted>;
  parents: Map<string, string | undefined>;
  childrenOf: Map<string, string[]>;
  skipped: OrphanOutcome[];
}

export async function forkOrphans(
  deps: RepairDeps,
  client: ForkClient,
  info: OrphanInfo,
  latest: string,
  log: Logger,
): Promise<OrphanOutcome[]> {
  const batch = await planOrphanForks(deps, client, info, latest);
  const out = [...batch.skipped];
  const inBatch = new Set(info.workflowIds);
  // Children (rows whose parent is in this batch) go first.
  const order = [...batch.plans.keys()].sort(
    (a, b) => Number(inBatch.has(batch.parents.get(b) ?? '')) - Number(inBatch.has(batch.parents.get(a) ?? '')),
  );
  for (const id of order) {
    const plan = batch.plans.get(id);
    if (plan) out.push(await forkOrphan(deps, client, log, batch, id, plan));
  }
  log.notice('orphaned-version workflows forked onto the latest version', {
    event: 'orphaned_version_forked',
    applicationVersion: info.applicationVersion,
    latest,
    forked: out.filter((o) => o.outcome === 'forked' || o.outcome === 'already-forked').length,
    total: info.workflowIds.length,
  });
  return out;
}

async function planOrphanForks(deps: RepairDeps, client: ForkClient, info: OrphanInfo, latest: string): Promise<OrphanForks> {
  const set = new Set(info.workflowIds);
  const batch: OrphanForks = { plans: new Map(), parents: new Map(), childrenOf: new Map(), skipped: [] };
  for (const id of info.workflowIds) {
    const status = await client.getWorkflow(id);
    // Only a row still waiting, on the version nobody runs: once an executor of that version claimed it
    // (PENDING, or re-stamped), it is live work, and forking plus cancelling it would run steps twice.
    if (!status || status.status !== 'ENQUEUED' || (status.applicationVersion ?? null) !== info.applicationVersion) {
      const why = !status
        ? 'missing'
        : status.status !== 'ENQUEUED'
          ? `status ${status.status}`
          : `now on version ${status.applicationVersion ?? '(none)'}`;
      batch.skipped.push({ workflowId: id, outcome: 'skipped', why });
      continue;
    }
    const steps = (await client.listWorkflowSteps(id)) ?? [];
    const startStep = steps.reduce((m, s) => Math.max(m, s.functionID + 1), 0);
    const refused = await forkWouldReapply(deps.db, deps.dataSourceSchemas ?? [], id, startStep);
    if (refused) {
      deps.logger.warn('not forking onto the latest version', { event: 'repair_refused', workflowId: id, why: refused });
      batch.skipped.push({ workflowId: id, outcome: 'skipped', why: refused });
      continue;
    }
    const { root, depth } = await lineageOf(client, id, status.forkedFrom);
    const n = depth + 1;
    batch.parents.set(id, status.parentWorkflowID);
    if (n > deps.maxForks) {
      batch.plans.set(id, { exhausted: true, root, n });
      continue;
    }
    const children = steps.map((s) => s.childWorkflowID).filter((c): c is string => c !== null && set.has(c));
    batch.plans.set(id, {
      source: id,
      root,
      n,
      newWorkflowId: forkId(root, n),
      startStep,
      applicationVersion: latest,
      queue: queueOf(status),
      reason: 'orphaned-version',
      divergedWorkflowId: undefined,
      detail: `version ${info.applicationVersion ?? '(none)'} has no live executor; forked onto ${latest}`,
    });
    if (children.length) batch.childrenOf.set(id, children);
  }
  return batch;
}

/** The batch's children's forks, to remap the parent's copied child-start rows to. */
function replacementsOf(batch: OrphanForks, id: string): Record<string, string> | undefined {
  const pairs = (batch.childrenOf.get(id) ?? []).flatMap((c) => {
    const cp = batch.plans.get(c);
    return cp && !('exhausted' in cp) ? [[c, cp.newWorkflowId] as const] : [];
  });
  return pairs.length ? Object.fromEntries(pairs) : undefined;
}

async function forkOrphan(
  deps: RepairDeps,
  client: ForkClient,
  log: Logger,
  batch: OrphanForks,
  id: string,
  plan: ForkPlan | Exhausted,
): Promise<OrphanOutcome> {
  // One row's failure must not strand the rest: the batch is no longer PENDING, so a redelivery of the
  // death notice would not find it again. Failures are logged for the reaper's sweep and a human.
  const result = await underRootLock(deps, plan.root, async (): Promise<OrphanOutcome> => {
    if ('exhausted' in plan) {
      await deadLetter(deps, { workflowId: id, root: plan.root, forks: plan.n - 1, reason: 'orphaned-version', error: undefined }, log);
      return { workflowId: id, outcome: 'dead-lettered' };
    }
    const replacementChildren = replacementsOf(batch, id);
    const parentPlan = batch.plans.get(batch.parents.get(id) ?? '');
    await ledger(deps, plan, parentPlan && !('exhausted' in parentPlan) ? parentPlan.newWorkflowId : undefined);
    if (deps.faults?.enabled) await deps.faults.hit('fork.beforeFork', { workflowId: id, newWorkflowId: plan.newWorkflowId });
    const outcome = await forkOnce(client, {
      source: id,
      newWorkflowId: plan.newWorkflowId,
      startStep: plan.startStep,
      applicationVersion: plan.applicationVersion,
      queue: plan.queue,
      ...(replacementChildren ? { replacementChildren } : {}),
    });
    if (deps.faults?.enabled) await deps.faults.hit('fork.afterFork', { workflowId: id, newWorkflowId: plan.newWorkflowId });
    // cancelWorkflow is DBOS's statement (status NOT IN SUCCESS/ERROR): a v1 run that claimed the row in
    // the meantime parks at its next checkpoint; a finished one is left alone.
    await client.cancelWorkflow(id);
    await markOriginalCancelled(deps.db, plan.newWorkflowId);
    return { workflowId: id, outcome, newWorkflowId: plan.newWorkflowId, cancelled: true };
  }).catch((err: unknown): OrphanOutcome => {
    log.error('fork-to-latest failed for a workflow; it stays ENQUEUED on its old version', {
      workflowId: id,
      err,
      event: 'orphaned_version_fork_failed',
    });
    return { workflowId: id, outcome: 'failed', why: errorMessage(err) };
  });
  return result === 'busy' ? { workflowId: id, outcome: 'busy' } : result;
}

/**
 * A fork-to-latest row older than this with no fork under its ID will never get one from the process that
 * wrote it: no invocation outlives FUNCTION_TIMEOUT_S (at most an hour). Dropped then, if its original no
 * longer waits (claimed, finished or cancelled meanwhile), so such rows cannot pile up in every pass.
 */
export const ABANDONED_INTENT_MS = 2 * 3_600_000;

/**
 * Finishes fork-to-latest forks interrupted after their ledger row, so two lineages never run and no
 * original is lost: the fork exists → cancel the original; it does not and the original still waits
 * ENQUEUED → make the fork from the row (same deterministic ID, so racing the process that wrote the row
 * is harmless), then cancel; the original no longer waits → leave it (it is live or done, and cancelling
 * it with no fork would lose it). Idempotent; the reaper calls it each orphaned-versions pass.
 */
export async function cancelForkedOriginals(deps: RepairDeps, limit = 100): Promise<string[]> {
  const pending = await uncancelledOriginals(deps.db, deps.applicationName, limit);
  if (!pending.length) return [];
  const client = await deps.dbos();
  const log = deps.logger.child({ component: 'fork', policy: 'fork-to-latest' });
  const done: string[] = [];
  for (const row of pending) {
    // One row's failure must not hold up the rows behind it (they are read oldest first).
    const finished = await finishOne(deps, client, log, row).catch((err: unknown) => {
      log.error('could not finish an interrupted fork-to-latest fork; the next pass retries', {
        workflowId: row.source,
        newWorkflowId: row.newWorkflowId,
        err,
        event: 'orphaned_version_fork_failed',
      });
      return false;
    });
    if (finished) done.push(row.source);
  }
  if (done.length)
    log.notice('finished interrupted fork-to-latest forks (originals cancelled)', {
      event: 'orphaned_version_cancelled',
      count: done.length,
    });
  return done;
}

async function finishOne(deps: RepairDeps, client: ForkClient, log: Logger, row: UncancelledOriginal): Promise<boolean> {
  const { source, newWorkflowId } = row;
  const fork = await client.getWorkflow(newWorkflowId);
  if (!fork) {
    const original = await client.getWorkflow(source);
    if (original?.status !== 'ENQUEUED') {
      const dropped = row.ageMs > ABANDONED_INTENT_MS && (await dropAbandonedForkIntent(deps.db, newWorkflowId, ABANDONED_INTENT_MS));
      log.warn('fork-to-latest was interrupted before its fork and the original no longer waits: left alone', {
        workflowId: source,
        newWorkflowId,
        status: original?.status,
        dropped,
      });
      return false;
    }
    await forkOnce(client, {
      source,
      newWorkflowId,
      startStep: row.fromStep,
      applicationVersion: row.applicationVersion,
      queue: queueOf(original),
      ...(row.replacementChildren ? { replacementChildren: row.replacementChildren } : {}),
    });
  } else if (fork.forkedFrom !== source) {
    log.error('the ledger names a fork-to-latest fork that was forked from another workflow; left for a human', {
      workflowId: source,
      newWorkflowId,
      forkedFrom: fork.forkedFrom,
      event: 'orphaned_version_fork_failed',
    });
    return false;
  }
  // cancelWorkflow is DBOS's statement (status NOT IN SUCCESS/ERROR): a finished original is left alone.
  await client.cancelWorkflow(source);
  await markOriginalCancelled(deps.db, newWorkflowId);
  return true;
}
