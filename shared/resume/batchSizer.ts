/**
 * Sizes recovery batches by time, under the configured cap (RECOVERY_BATCH_SIZE). A batch holds its rows'
 * locks from its UPDATE to its commit, and live executors' claims of those rows wait that long; a fixed
 * row count turns into a long hold whenever the machine is busy (1,000 rows take 16–35 ms on a quiet
 * 2-core machine and 150–350 ms at load 15, bench/README.md). Sizing each batch from the last one's rate
 * keeps the hold near the target at any load, and a busy moment shrinks the next batch instead of the
 * next hundred.
 *
 * The first batch of a recovery is the slowest per row (a new session's caches, a plan made for the first
 * time, pages not yet in shared buffers: 2–3× a middle batch in the per-statement traces), so it starts
 * at a quarter of the cap. Growth is at most 2× per batch, so one fast batch cannot overshoot.
 */
export const DEFAULT_BATCH_TARGET_MS = 50;
/** Never below this many rows (or the cap, if smaller): round trips must stay a small part of the work. */
const FLOOR_ROWS = 50;
const FIRST_BATCH_SHARE = 4;

export class BatchSizer {
  #size: number;
  readonly #cap: number;
  readonly #floor: number;
  readonly #targetMs: number;

  constructor(cap: number, targetMs = DEFAULT_BATCH_TARGET_MS) {
    this.#cap = cap;
    this.#floor = Math.min(cap, FLOOR_ROWS);
    this.#targetMs = targetMs;
    this.#size = Math.max(this.#floor, Math.ceil(cap / FIRST_BATCH_SHARE));
  }

  get size(): number {
    return this.#size;
  }

  /** The statement that moved `rows` of a full batch took `ms`; a short batch (the range's end) says nothing. */
  observe(rows: number, ms: number): void {
    if (rows < this.#size || rows <= 0) return;
    const fit = Math.floor((rows * this.#targetMs) / Math.max(ms, 0.1));
    this.#size = Math.min(this.#cap, Math.max(this.#floor, Math.min(fit, this.#size * 2)));
  }
}
