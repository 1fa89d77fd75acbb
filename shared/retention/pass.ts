import type { Config } from '../config/index.js';
import type { Db } from '../db/pool.js';
import { readRetentionState, recordPass, saveRound, type RetentionRound } from '../db/queries/retentionState.js';
import type { Budget } from '../lifecycle/deadline.js';
import type { Logger } from '../log.js';
import type { Faults } from '../testing/faults.js';
import { type Candidate, deleteBatch, readCandidates, rowsCutoff, type Thresholds } from './batch.js';
import { type OwnPruned, pruneOwnTables } from './ownTables.js';
import { deletes, policyOf, type RetentionPolicy } from './policy.js';
import { cancelTimedOut, findTimedOut } from './timeout.js';

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
  /** Workflows per delete statement: adapted so a statement holds its row locks ~TARGET_BATCH_MS. */
  batchSize?: number;
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
  onBatch?: (b: { deleted: number; durationMs: number; batchSize: number }) => void;
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

/** A delete statement aims at this; the batch size halves above 2x and doubles below 1/2. */
export const TARGET_BATCH_MS = 40;
export const MIN_BATCH = 10;
export const MAX_BATCH = 5_000;
const TIMEOUT_BATCH = 100;

export async function runRetentionPass(deps: RetentionDeps, o: RetentionPassOptions): Promise<RetentionPassResult> {
  const { db, config } = deps;
  const app = config.applicationName;
  const policy = policyOf(config);
  const dryRun = o.dryRun ?? false;
  const started = deps.clock();
  const log = deps.logger.child({ pass: 'retention', dryRun });
  const tuning = o.tuning ?? {};
  const result: RetentionPassResult = {
    policy,
    dryRun,
    deleted: 0,
    steps: 0,
    inputs: 0,
    outputs: 0,
    batches: 0,
    longestBatchMs: 0,
    timedOut: 0,
    timedOutWorkflows: [],
    cutoffMs: null,
    roundFinished: false,
    stoppedBecause: 'done',
    durationMs: 0,
  };
  if (!deletes(policy) && policy.globalTimeoutMs === undefined) return { ...result, stoppedBecause: 'off' };
  const sliceEnd = o.sliceMs === undefined ? Number.POSITIVE_INFINITY : started + o.sliceMs;
  const stop = (): 'slice' | 'budget' | undefined =>
    o.budget.expired() || (o.signal?.aborted ?? false) ? 'budget' : deps.clock() >= sliceEnd ? 'slice' : undefined;

  // The global timeout first: it is about live work, retention only about history.
  if (policy.globalTimeoutMs !== undefined) {
    if (dryRun) {
      const roots = await findTimedOut(db, app, policy.globalTimeoutMs, TIMEOUT_BATCH);
      result.timedOut = roots.length;
      result.timedOutWorkflows = roots;
    } else {
      for (;;) {
        const why = stop();
        if (why) {
          result.stoppedBecause = why;
          return finish(deps, result, started, log);
        }
        const cancelled = await cancelTimedOut(db, app, policy.globalTimeoutMs, TIMEOUT_BATCH);
        const roots = new Map<string, number>();
        for (const c of cancelled) roots.set(c.root, (roots.get(c.root) ?? 0) + (c.workflowId === c.root ? 0 : 1));
        for (const [root, children] of roots) {
          log.warn('workflow cancelled by the global timeout', {
            event: 'workflow_timed_out',
            workflowId: root,
            childrenCancelled: children,
            timeoutMs: policy.globalTimeoutMs,
          });
          if (result.timedOutWorkflows.length < 100) result.timedOutWorkflows.push(root);
        }
        result.timedOut += cancelled.length;
        // Fewer roots than asked: none left (a root skipped as locked is picked up by the next pass).
        if (roots.size < TIMEOUT_BATCH) break;
      }
    }
  }

  if (deletes(policy)) {
    let rows: number | undefined;
    if (policy.maxCompleted !== undefined) {
      const cached = tuning.rowsCutoff;
      if (cached && cached.keep === policy.maxCompleted && deps.clock() - cached.readAt < ROWS_CUTOFF_REUSE_MS) rows = cached.value;
      else {
        rows = await rowsCutoff(db, app, policy.maxCompleted);
        tuning.rowsCutoff = { value: rows, readAt: deps.clock(), keep: policy.maxCompleted };
      }
    }
    const t: Thresholds = { rowsCutoffMs: rows, maxAgeMs: policy.maxAgeMs };
    const ageCutoff = policy.maxAgeMs !== undefined ? deps.clock() - policy.maxAgeMs : undefined;
    const cutoff = Math.max(t.rowsCutoffMs ?? Number.NEGATIVE_INFINITY, ageCutoff ?? Number.NEGATIVE_INFINITY);
    result.cutoffMs = Number.isFinite(cutoff) ? cutoff : null;
    const state = await readRetentionState(db, app);
    // A dry run starts from the beginning and saves nothing: it lists what a fresh round would delete.
    const round: RetentionRound = !dryRun && state.round ? state.round : { cutoffMs: result.cutoffMs ?? 0, watermark: undefined, startedAt: new Date(deps.clock()) };
    const would: string[] = [];
    const listLimit = o.listLimit ?? 1_000;
    for (;;) {
      const why = stop();
      if (why) {
        result.stoppedBecause = why;
        break;
      }
      const size = (tuning.batchSize ??= 200);
      const candidates: Candidate[] = await readCandidates(db, app, t, round.watermark, size);
      const last = candidates.at(-1);
      if (candidates.length && dryRun) {
        result.deleted += candidates.length;
        for (const c of candidates) if (would.length < listLimit) would.push(c.workflowId);
      } else if (candidates.length) {
        if (deps.faults.enabled) await deps.faults.hit('retention.beforeDelete', { workflowIds: candidates.map((c) => c.workflowId) });
        const d = await deleteBatch(db, app, t, candidates.map((c) => c.workflowId));
        const ms = d.heldMs;
        result.batches += 1;
        result.deleted += d.workflows;
        result.steps += d.steps;
        result.inputs += d.inputs;
        result.outputs += d.outputs;
        result.longestBatchMs = Math.max(result.longestBatchMs, ms);
        log.info('retention batch', { event: 'retention_batch', deleted: d.workflows, examined: candidates.length, steps: d.steps, durationMs: ms, batchSize: size });
        o.onBatch?.({ deleted: d.workflows, durationMs: ms, batchSize: size });
        tuning.batchSize = ms > 2 * TARGET_BATCH_MS ? Math.max(MIN_BATCH, Math.floor(size / 2)) : ms < TARGET_BATCH_MS / 2 ? Math.min(MAX_BATCH, size * 2) : size;
      }
      if (last) round.watermark = { completedAt: last.completedAt, workflowId: last.workflowId };
      round.cutoffMs = result.cutoffMs ?? 0;
      if (candidates.length < size) {
        // Everything before the cutoff has been examined: the next round starts from the oldest again
        // (rows held now — a running child, a pending repair — are looked at again then).
        result.roundFinished = true;
        if (!dryRun) await saveRound(db, app, undefined);
        break;
      }
      if (!dryRun) await saveRound(db, app, round);
    }
    if (dryRun) result.wouldDelete = would;
    if (result.roundFinished && !dryRun && !stop()) {
      result.own = await pruneOwnTables(db, app, policy.maxAgeMs ?? 0, 1_000);
    }
  }
  return finish(deps, result, started, log);
}

async function finish(deps: RetentionDeps, result: RetentionPassResult, started: number, log: Logger): Promise<RetentionPassResult> {
  result.durationMs = deps.clock() - started;
  if (result.dryRun) return result;
  const { wouldDelete: _w, ...summary } = result;
  await recordPass(deps.db, deps.config.applicationName, { ...summary, at: new Date(deps.clock()).toISOString() }, result.deleted, result.timedOut);
  if (result.deleted || result.timedOut || result.own) log.info('retention pass', { event: 'retention_pass', ...summary });
  return result;
}
