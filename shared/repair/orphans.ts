import { forkWouldReapply } from '../dbos/dataSourceCheckpoints.js';
import { dropAbandonedForkIntent, markOriginalCancelled, type UncancelledOriginal, uncancelledOriginals } from '../db/queries/forks.js';
import type { Logger } from '../log.js';
import { deadLetter, type ForkDeps, ledger, underRootLock } from './autoFork.js';
import { type ForkClient, forkId, forkOnce, type ForkPlan, lineageOf, queueOf } from './plan.js';
import type { OrphanInfo, OrphanOutcome } from './orphanOutcome.js';
import { rewindOrphansToLatest } from './rewindOrphans.js';

/**
 * ORPHANED_VERSION_POLICY=fork-to-latest: recovery re-enqueued rows of a version no live executor runs,
 * so they would wait forever (DBOS claims a row only on its exact version). Each is forked onto the latest
 * version from after its last checkpoint, then the original is cancelled so that a later executor of the
 * old version can never run a second lineage. Same primitive, IDs, budget and ledger as autoFork.
 *
 * Ledger row first, fork second, cancel third. The row (original not yet cancelled) is written before the
 * fork so that a crash at any point leaves something cancelForkedOriginals can see: after the fork, it
 * cancels the original; before it, it makes the fork from the row (the row holds the plan) and then
 * cancels. Cancelling first could lose the workflow. Children re-enqueued in the same batch are forked
 * before their parents, and a parent's copied child-start row is remapped to the child's fork so the
 * parent awaits the lineage that runs.
 *
 * Under REPAIR_MODE=rewind (the default) the rows are rewound in place instead (shared/repair/rewindOrphans.ts);
 * `forkOnly` for its fallbacks.
 */
export async function forkOrphansToLatest(deps: ForkDeps, info: OrphanInfo, opts: { forkOnly?: boolean } = {}): Promise<OrphanOutcome[]> {
  const client = await deps.dbos();
  const log = deps.logger.child({ component: 'fork', policy: 'fork-to-latest', executorId: info.executorId });
  const latest = (await client.getLatestApplicationVersion()).versionName;
  if (latest === info.applicationVersion) {
    log.warn('orphaned version is the latest: nothing newer to fork onto', { applicationVersion: latest });
    return info.workflowIds.map((workflowId) => ({ workflowId, outcome: 'skipped', why: 'version is the latest' }));
  }
  if (!opts.forkOnly && (deps.repairMode ?? 'rewind') === 'rewind') {
    const { outcomes, fallback } = await rewindOrphansToLatest(deps, client, info, latest, log);
    if (fallback.length) outcomes.push(...(await forkOrphansToLatest(deps, { ...info, workflowIds: fallback }, { forkOnly: true })));
    log.notice('orphaned-version workflows rewound onto the latest version', {
      event: 'orphaned_version_forked',
      applicationVersion: info.applicationVersion,
      latest,
      rewound: outcomes.filter((o) => o.outcome === 'rewound').length,
      total: info.workflowIds.length,
    });
    return outcomes;
  }

  // Plan every row first so parents can point at their children's deterministic fork IDs.
  const set = new Set(info.workflowIds);
  const plans = new Map<string, ForkPlan | { exhausted: true; root: string; n: number }>();
  const parents = new Map<string, string | undefined>();
  const childrenOf = new Map<string, string[]>();
  const out: OrphanOutcome[] = [];
  for (const id of info.workflowIds) {
    const status = await client.getWorkflow(id);
    // Only a row still waiting, on the version nobody runs: once an executor of that version claimed it
    // (PENDING, or re-stamped), it is live work, and forking plus cancelling it would run steps twice.
    if (!status || status.status !== 'ENQUEUED' || (status.applicationVersion ?? null) !== info.applicationVersion) {
      const why = !status ? 'missing' : status.status !== 'ENQUEUED' ? `status ${status.status}` : `now on version ${status.applicationVersion ?? '(none)'}`;
      out.push({ workflowId: id, outcome: 'skipped', why });
      continue;
    }
    const steps = (await client.listWorkflowSteps(id)) ?? [];
    const startStep = steps.reduce((m, s) => Math.max(m, s.functionID + 1), 0);
    const refused = await forkWouldReapply(deps.db, deps.dataSourceSchemas ?? [], id, startStep);
    if (refused) {
      deps.logger.warn('not forking onto the latest version', { event: 'repair_refused', workflowId: id, why: refused });
      out.push({ workflowId: id, outcome: 'skipped', why: refused });
      continue;
    }
    const { root, depth } = await lineageOf(client, id, status.forkedFrom);
    const n = depth + 1;
    parents.set(id, status.parentWorkflowID);
    if (n > deps.maxForks) {
      plans.set(id, { exhausted: true, root, n });
      continue;
    }
    const children = steps.map((s) => s.childWorkflowID).filter((c): c is string => c !== null && set.has(c));
    plans.set(id, {
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
    if (children.length) childrenOf.set(id, children);
  }
  const replacementsOf = (id: string): Record<string, string> | undefined => {
    const pairs = (childrenOf.get(id) ?? []).flatMap((c) => {
      const cp = plans.get(c);
      return cp && !('exhausted' in cp) ? [[c, cp.newWorkflowId] as const] : [];
    });
    return pairs.length ? Object.fromEntries(pairs) : undefined;
  };

  // Children (rows whose parent is in this batch) go first.
  const order = [...plans.keys()].sort((a, b) => Number(set.has(parents.get(b) ?? '')) - Number(set.has(parents.get(a) ?? '')));
  for (const id of order) {
    const plan = plans.get(id);
    if (!plan) continue;
    // One row's failure must not strand the rest: the batch is no longer PENDING, so a redelivery of the
    // death notice would not find it again. Failures are logged for the reaper's sweep and a human.
    const result = await underRootLock(deps, plan.root, async (): Promise<OrphanOutcome> => {
      if ('exhausted' in plan) {
        await deadLetter(deps, { workflowId: id, root: plan.root, forks: plan.n - 1, reason: 'orphaned-version', error: undefined }, log);
        return { workflowId: id, outcome: 'dead-lettered' };
      }
      const replacementChildren = replacementsOf(id);
      const parentPlan = plans.get(parents.get(id) ?? '');
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
      log.error('fork-to-latest failed for a workflow; it stays ENQUEUED on its old version', { workflowId: id, err, event: 'orphaned_version_fork_failed' });
      return { workflowId: id, outcome: 'failed', why: err instanceof Error ? err.message : String(err) };
    });
    out.push(result === 'busy' ? { workflowId: id, outcome: 'busy' } : result);
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
export async function cancelForkedOriginals(deps: ForkDeps, limit = 100): Promise<string[]> {
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
  if (done.length) log.notice('finished interrupted fork-to-latest forks (originals cancelled)', { event: 'orphaned_version_cancelled', count: done.length });
  return done;
}

async function finishOne(deps: ForkDeps, client: ForkClient, log: Logger, row: UncancelledOriginal): Promise<boolean> {
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
