import { findDiverged } from '../dbos/diverged.js';
import { reconcileForkLedger } from '../repair/primitives/reconcile.js';
import { shouldStop, type DivergedPassResult, type ReaperDeps, type ReaperState, type TickContext } from './types.js';

/**
 * Diverged workflows (replay divergence, DBOSUnexpectedStepError, code 26) are handed to the fork module,
 * which owns the lineage bound, the deterministic IDs and the dead letter. The pass only finds them; the
 * fork function is a dependency so the module can be wired in without touching this file.
 */
export const DIVERGED_BATCH = 20;
/** Overlap between consecutive scans: completed_at is the database clock, the cursor the reaper's. */
export const DIVERGED_SLACK_MS = 60_000;

export async function divergedPass(deps: ReaperDeps, ctx: TickContext, state: ReaperState = {}): Promise<DivergedPassResult> {
  const { db, config } = deps;
  const now = deps.clock();
  // The first tick of an invocation looks back REAPER_DIVERGED_LOOKBACK_MS; later ticks only since the
  // previous scan, so the pass stays a short index range scan however long the history is.
  const since = state.divergedScannedTo ?? now - config.reaper.divergedLookbackMs;
  const handed = (state.divergedHanded ??= new Set<string>());
  // Rows handed earlier in this invocation may still match (a fork module that declined them leaves them
  // ERROR); fetch past them so they never starve new ones.
  const limit = DIVERGED_BATCH + handed.size;
  const rows = await findDiverged(db, config.applicationName, limit, { completedSince: since });
  // A child fork the reconciled rows name is its parent fork's, as if the ledger had named it all along.
  const children = await reconcile(
    deps,
    ctx,
    rows.map((r) => r.workflowId),
    since,
  );
  // Handed once per ending: a workflow rewound in place that diverges again ends anew (another completed_at)
  // and is offered again in the same invocation, up to the repair budget.
  const ending = (r: { workflowId: string; completedAt: number | null }) => `${r.workflowId}@${r.completedAt ?? ''}`;
  const fresh = rows.filter((r) => !handed.has(ending(r)) && !children.has(r.workflowId)).slice(0, DIVERGED_BATCH);
  const ids = fresh.map((r) => r.workflowId);
  // A full fetch may have more behind it: scan the same window again next tick.
  if (rows.length < limit) state.divergedScannedTo = now - DIVERGED_SLACK_MS;
  const result: DivergedPassResult = { found: ids.length, handed: 0, failed: 0 };
  if (ctx.dryRun) {
    for (const id of ids) ctx.planned.push({ pass: 'diverged', action: 'fork', workflowId: id });
    return result;
  }
  if (!deps.repairDiverged) {
    if (ids.length) deps.logger.warn('diverged workflows found; no fork module wired', { event: 'diverged_not_forked', workflowIds: ids });
    return { ...result, skipped: 'no fork module wired' };
  }
  for (const row of fresh) {
    const id = row.workflowId;
    if (shouldStop(ctx)) break;
    // Once per invocation and ending: a failure is logged, and the next invocation's first tick offers it again.
    handed.add(ending(row));
    try {
      await deps.repairDiverged(id);
      result.handed += 1;
    } catch (err) {
      result.failed += 1;
      deps.logger.error('auto-fork of a diverged workflow failed', { workflowId: id, err, tick: ctx.tick, event: 'fork_failed' });
    }
  }
  return result;
}

/**
 * Records in the fork ledger the forks it lacks (made by the app's getResultWithAutoFork, which has no
 * ledger, or by a process that died before its row): along the candidates' chains, and every fork created
 * in this scan's window. Candidates' chains cover old forks whose last descendant diverges now; the window
 * covers forks that ended well, which no candidate would ever lead to. Returns the child forks the new rows
 * name. Which candidates are forked does not depend on it alone (findDiverged recognises fresh children by
 * their IDs), so a failure is logged and the pass goes on.
 */
async function reconcile(deps: ReaperDeps, ctx: TickContext, workflowIds: string[], since: number): Promise<Set<string>> {
  try {
    const done = await reconcileForkLedger(deps.db, deps.config.applicationName, { workflowIds, createdSince: since, dryRun: ctx.dryRun });
    if (done.length)
      deps.logger.notice('forks made outside the ledger recorded', { tick: ctx.tick, count: done.length, dryRun: ctx.dryRun });
    return new Set(done.flatMap((r) => (r.childForkId ? [r.childForkId] : [])));
  } catch (err) {
    deps.logger.warn('fork ledger reconciliation failed; the next tick retries', { err, tick: ctx.tick });
    return new Set();
  }
}
