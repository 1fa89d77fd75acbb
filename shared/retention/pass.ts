import type { Config } from '../config/index.js';
import type { Db, Faults, Logger } from '../../packages/executor/src/plane/index.js';
import { readRetentionState, recordPass, saveRound, type RetentionRound } from '../db/queries/retentionState.js';
import type { Budget } from '../lifecycle/deadline.js';
import { type Candidate, deleteBatch, readCandidates, rowsCutoff, type Thresholds } from '../dbos/retention/batch.js';
import { boundFor, INITIAL_BATCH, MIN_BATCH, nextBatchSize } from './batchSize.js';
import { type OwnPruned, pruneOwnTables } from './ownTables.js';
import { deletes, policyOf, type RetentionPolicy } from './policy.js';
import { cancelTimedOut, findTimedOut } from '../dbos/retention/timeout.js';

/**
 * One retention pass: the global timeout, then completed workflows beyond the thresholds in batches,
 * then (once a round has examined everything) afterlife's own tables. Every batch commits on its own and
 * the round's watermark is saved after it, so an invocation that ends mid-way leaves the next one where
 * it stopped; deleted rows are simply gone, so nothing is done twice. The pass stops at a batch boundary
 * when the budget (the invocation's) or the slice (the reaper's share of a tick) runs out.
 */
export interface RetentionDeps {
  config: Pick<Config, 'applicationName' | 'retention'>;
  db: Db;
  logger: Logger;
  faults: Faults;
  clock: () => number;
}

export interface RetentionTuning {
  /** Workflows per delete statement, adapted (batchSize.ts) so a statement stays well inside its lock bound. */
  batchSize?: number;
  /** Delete statements in a row, at the minimum size, that ran into the lock bound (batchSize.ts). */
  overBoundStreak?: number;
  /** The rows cutoff and when it was read: the reaper's once-a-second slices reuse it for a minute. */
  rowsCutoff?: { value: number | undefined; readAt: number; keep: number };
}

/** How long a slice reuses the rows cutoff (reading it walks RETENTION_MAX_COMPLETED index entries). */
export const ROWS_CUTOFF_REUSE_MS = 60_000;

export interface RetentionPassOptions {
  budget: Budget;
  dryRun?: boolean;
  signal?: AbortSignal | undefined;
  /** Stop after this much work (the reaper's slice of a tick); the CLI runs to the budget. */
  sliceMs?: number;
  tuning?: RetentionTuning;
  /** Dry run: list at most this many workflows (the count goes on to the budget). */
  listLimit?: number;
  onBatch?: (b: { deleted: number; durationMs: number; batchSize: number; overBound: boolean }) => void;
}

export interface RetentionPassResult {
  policy: RetentionPolicy;
  dryRun: boolean;
  /** Workflows deleted (dry run: that would be), with their rows in the payload and step tables. */
  deleted: number;
  steps: number;
  inputs: number;
  outputs: number;
  batches: number;
  /** The longest delete statement, sent → committed (its row locks are held no longer). */
  longestBatchMs: number;
  /** Delete statements cancelled at the lock bound (LOCK_BOUND_MS) and redone smaller. */
  overBound: number;
  /** Workflows the global timeout cancelled (roots and descendants); dry run: roots it would. */
  timedOut: number;
  /** The roots (at most 100 listed). */
  timedOutWorkflows: string[];
  /** Dry run: the workflows that would go (at most listLimit). */
  wouldDelete?: string[];
  /** afterlife's own tables, pruned when a round finished. */
  own?: OwnPruned;
  /** The effective cutoff (epoch ms): completed before it = beyond a threshold. */
  cutoffMs: number | null;
  roundFinished: boolean;
  stoppedBecause: 'off' | 'done' | 'slice' | 'budget';
  durationMs: number;
}

const TIMEOUT_BATCH = 100;

type Stop = 'slice' | 'budget';

/** What the steps of one pass share. */
interface Pass {
  deps: RetentionDeps;
  o: RetentionPassOptions;
  app: string;
  policy: RetentionPolicy;
  dryRun: boolean;
  log: Logger;
  tuning: RetentionTuning;
  result: RetentionPassResult;
  stop: () => Stop | undefined;
}

export async function runRetentionPass(deps: RetentionDeps, o: RetentionPassOptions): Promise<RetentionPassResult> {
  const policy = policyOf(deps.config);
  const dryRun = o.dryRun ?? false;
  const started = deps.clock();
  const log = deps.logger.child({ pass: 'retention', dryRun });
  const result = emptyResult(policy, dryRun);
  if (!deletes(policy) && policy.globalTimeoutMs === undefined) return { ...result, stoppedBecause: 'off' };
  const sliceEnd = o.sliceMs === undefined ? Number.POSITIVE_INFINITY : started + o.sliceMs;
  const stop = (): Stop | undefined =>
    o.budget.expired() || (o.signal?.aborted ?? false) ? 'budget' : deps.clock() >= sliceEnd ? 'slice' : undefined;
  const p: Pass = { deps, o, app: deps.config.applicationName, policy, dryRun, log, tuning: o.tuning ?? {}, result, stop };

  // The global timeout first: it is about live work, retention only about history.
  const stopped = await globalTimeout(p);
  if (stopped) result.stoppedBecause = stopped;
  else if (deletes(policy)) await deleteRound(p);
  return finish(deps, result, started, log);
}

function emptyResult(policy: RetentionPolicy, dryRun: boolean): RetentionPassResult {
  return {
    policy,
    dryRun,
    deleted: 0,
    steps: 0,
    inputs: 0,
    outputs: 0,
    batches: 0,
    longestBatchMs: 0,
    overBound: 0,
    timedOut: 0,
    timedOutWorkflows: [],
    cutoffMs: null,
    roundFinished: false,
    stoppedBecause: 'done',
    durationMs: 0,
  };
}

/** WORKFLOW_GLOBAL_TIMEOUT_MS: cancels (dry run: lists) the timed-out roots; the reason when it had to stop. */
async function globalTimeout(p: Pass): Promise<Stop | undefined> {
  const timeoutMs = p.policy.globalTimeoutMs;
  if (timeoutMs === undefined) return undefined;
  const { db } = p.deps;
  if (p.dryRun) {
    const roots = await findTimedOut(db, p.app, timeoutMs, TIMEOUT_BATCH);
    p.result.timedOut = roots.length;
    p.result.timedOutWorkflows = roots;
    return undefined;
  }
  for (;;) {
    const why = p.stop();
    if (why) return why;
    const cancelled = await cancelTimedOut(db, p.app, timeoutMs, TIMEOUT_BATCH);
    const roots = new Map<string, number>();
    for (const c of cancelled) roots.set(c.root, (roots.get(c.root) ?? 0) + (c.workflowId === c.root ? 0 : 1));
    for (const [root, children] of roots) {
      p.log.warn('workflow cancelled by the global timeout', {
        event: 'workflow_timed_out',
        workflowId: root,
        childrenCancelled: children,
        timeoutMs,
      });
      if (p.result.timedOutWorkflows.length < 100) p.result.timedOutWorkflows.push(root);
    }
    p.result.timedOut += cancelled.length;
    // Fewer roots than asked: none left (a root skipped as locked is picked up by the next pass).
    if (roots.size < TIMEOUT_BATCH) return undefined;
  }
}

/** The thresholds of this pass: the rows cutoff (reused for a minute across slices) and the age. */
async function thresholds(p: Pass): Promise<Thresholds> {
  const keep = p.policy.maxCompleted;
  let rows: number | undefined;
  if (keep !== undefined) {
    const cached = p.tuning.rowsCutoff;
    if (cached && cached.keep === keep && p.deps.clock() - cached.readAt < ROWS_CUTOFF_REUSE_MS) rows = cached.value;
    else {
      rows = await rowsCutoff(p.deps.db, p.app, keep);
      p.tuning.rowsCutoff = { value: rows, readAt: p.deps.clock(), keep };
    }
  }
  const t: Thresholds = { rowsCutoffMs: rows, maxAgeMs: p.policy.maxAgeMs };
  const ageCutoff = t.maxAgeMs !== undefined ? p.deps.clock() - t.maxAgeMs : undefined;
  const cutoff = Math.max(rows ?? Number.NEGATIVE_INFINITY, ageCutoff ?? Number.NEGATIVE_INFINITY);
  p.result.cutoffMs = Number.isFinite(cutoff) ? cutoff : null;
  return t;
}

/**
 * Batches from the round's watermark until the round finishes or the pass must stop; then, once a round
 * has examined everything, afterlife's own tables.
 */
async function deleteRound(p: Pass): Promise<void> {
  const { db } = p.deps;
  const t = await thresholds(p);
  const state = await readRetentionState(db, p.app);
  // A dry run starts from the beginning and saves nothing: it lists what a fresh round would delete.
  const round: RetentionRound =
    !p.dryRun && state.round
      ? state.round
      : { cutoffMs: p.result.cutoffMs ?? 0, watermark: undefined, startedAt: new Date(p.deps.clock()) };
  const would: string[] = [];
  for (;;) {
    const why = p.stop();
    if (why) {
      p.result.stoppedBecause = why;
      break;
    }
    const size = (p.tuning.batchSize ??= INITIAL_BATCH);
    const candidates = await readCandidates(db, p.app, t, round.watermark, size);
    const retry = p.dryRun ? (listWould(p, candidates, would), false) : await deleteCandidates(p, t, candidates, size);
    // Cancelled at the lock bound: the same watermark again, with fewer workflows.
    if (retry) continue;
    const last = candidates.at(-1);
    if (last) round.watermark = { completedAt: last.completedAt, workflowId: last.workflowId };
    round.cutoffMs = p.result.cutoffMs ?? 0;
    if (candidates.length < size) {
      // Everything before the cutoff has been examined: the next round starts from the oldest again
      // (rows held now — a running child, a pending repair — are looked at again then).
      p.result.roundFinished = true;
      if (!p.dryRun) await saveRound(db, p.app, undefined);
      break;
    }
    if (!p.dryRun) await saveRound(db, p.app, round);
  }
  if (p.dryRun) p.result.wouldDelete = would;
  if (p.result.roundFinished && !p.dryRun && !p.stop()) p.result.own = await pruneOwnTables(db, p.app, p.policy.maxAgeMs ?? 0, 1_000);
}

/** Dry run: count the candidates and list the first listLimit. */
function listWould(p: Pass, candidates: Candidate[], would: string[]): void {
  p.result.deleted += candidates.length;
  const limit = p.o.listLimit ?? 1_000;
  for (const c of candidates) if (would.length < limit) would.push(c.workflowId);
}

/**
 * One delete statement of `candidates`, within the lock bound; adapts the batch size to how long it took.
 * True when it ran into the bound (nothing deleted): the caller retries from the same watermark.
 */
async function deleteCandidates(p: Pass, t: Thresholds, candidates: Candidate[], size: number): Promise<boolean> {
  if (!candidates.length) return false;
  const { deps, result, tuning } = p;
  const ids = candidates.map((c) => c.workflowId);
  if (deps.faults.enabled) await deps.faults.hit('retention.beforeDelete', { workflowIds: ids });
  const streak = tuning.overBoundStreak ?? 0;
  const bound = boundFor(size, streak);
  if (bound === undefined)
    p.log.warn('retention batch runs without its lock bound', {
      event: 'retention_unbounded',
      workflowId: ids[0],
      overBoundStreak: streak,
    });
  const d = await deleteBatch(deps.db, p.app, t, ids, bound);
  const ms = d.heldMs;
  result.batches += 1;
  result.deleted += d.workflows;
  result.steps += d.steps;
  result.inputs += d.inputs;
  result.outputs += d.outputs;
  result.longestBatchMs = Math.max(result.longestBatchMs, ms);
  if (d.overBound) result.overBound += 1;
  p.log.info('retention batch', {
    event: 'retention_batch',
    deleted: d.workflows,
    examined: candidates.length,
    steps: d.steps,
    durationMs: ms,
    batchSize: size,
    overBound: d.overBound,
  });
  p.o.onBatch?.({ deleted: d.workflows, durationMs: ms, batchSize: size, overBound: d.overBound });
  tuning.batchSize = nextBatchSize(size, ms, d.overBound);
  // Only cancellations of a lone workflow count towards lifting the bound for it (batchSize.ts).
  tuning.overBoundStreak = d.overBound ? (size <= MIN_BATCH ? streak + 1 : 0) : 0;
  return d.overBound;
}

async function finish(deps: RetentionDeps, result: RetentionPassResult, started: number, log: Logger): Promise<RetentionPassResult> {
  result.durationMs = deps.clock() - started;
  if (result.dryRun) return result;
  const { wouldDelete: _w, ...summary } = result;
  await recordPass(
    deps.db,
    deps.config.applicationName,
    { ...summary, at: new Date(deps.clock()).toISOString() },
    result.deleted,
    result.timedOut,
  );
  if (result.deleted || result.timedOut || result.own) log.info('retention pass', { event: 'retention_pass', ...summary });
  return result;
}
