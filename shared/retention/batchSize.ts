/**
 * How many workflows one retention delete statement takes, and how long it may hold its row locks. The
 * issue's bound is 100 ms for the longest statement holding locks; it holds by construction on the server
 * (LOCK_BOUND_MS, a statement_timeout: a statement past it is cancelled, releasing its locks, and retried
 * smaller) and the adaptive size keeps statements well under it, so the bound is rarely reached.
 * @module
 */

/**
 * statement_timeout of a delete statement. Lower: a tighter bound on how long a delete holds row locks,
 * but more statements cancelled and redone (wasted work) when the machine is slow. 60 ms leaves 40 ms of
 * the 100 ms bound for the commit, the trip back and the pass's own scheduling, which is what a measurement
 * from the pass's side includes (20–30 ms at load 10–15 on 2 shared cores; at 80 ms, 2 of 1,970 statements
 * measured over 100 ms that way while none held its locks over 72 ms on the server).
 */
export const LOCK_BOUND_MS = 60;

/**
 * The size grows while a statement takes less than this, and halves once one takes more than
 * SHRINK_ABOVE_MS, so statements settle between the two. Higher: fewer, larger statements (each batch
 * also costs a candidate read and a watermark write, so throughput rises); but the headroom to the bound
 * shrinks: at 40 ms a statement slowed 2× by CPU contention (2 shared cores at load 20 do that) still
 * finishes near LOCK_BOUND_MS.
 */
export const TARGET_BATCH_MS = 20;
export const SHRINK_ABOVE_MS = 40;

/**
 * Growth per fast statement. Slow (×1.25, not ×2), so a size that just fits is not doubled past the
 * bound in one step; the price is ~20 statements to grow tenfold after a slow spell.
 */
export const GROW_FACTOR = 1.25;

/** Down to one workflow per statement (a slow machine still makes progress), up to 5,000 (one read's worth). */
export const MIN_BATCH = 1;
export const MAX_BATCH = 5_000;
/** Where a pass starts: ~0.4 ms per workflow of 13 rows was measured on a loaded machine, so ~20 ms. */
export const INITIAL_BATCH = 50;

/**
 * A lone workflow whose delete runs into the bound this many times in a row is deleted without it. Such
 * a workflow has a history too large to delete in LOCK_BOUND_MS (thousands of steps) or the machine is
 * starved; the statement then locks that workflow's own rows only, which nothing live touches. Skipping it
 * instead would stall the round at its watermark for ever. Higher: more retries (wasted work) before that.
 */
export const OVER_BOUND_RETRIES = 3;

/** The next size after a statement that took `ms` (and was cancelled at the bound or not). */
export function nextBatchSize(size: number, ms: number, overBound: boolean): number {
  // Cancelled at the bound: well past SHRINK_ABOVE_MS, so shrink harder than halving.
  if (overBound) return Math.max(MIN_BATCH, Math.floor(size / 4));
  if (ms > SHRINK_ABOVE_MS) return Math.max(MIN_BATCH, Math.floor(size / 2));
  if (ms < TARGET_BATCH_MS) return Math.min(MAX_BATCH, Math.max(size + 1, Math.floor(size * GROW_FACTOR)));
  return size;
}

/**
 * The bound for the next delete statement: LOCK_BOUND_MS, or none for a lone workflow that ran into it
 * OVER_BOUND_RETRIES times in a row.
 */
export function boundFor(size: number, overBoundStreak: number): number | undefined {
  return size <= MIN_BATCH && overBoundStreak >= OVER_BOUND_RETRIES ? undefined : LOCK_BOUND_MS;
}
