import type { Db } from '../db/pool.js';

/**
 * Backpressure on the WAL flush, between recovery batches. A statement that needs WAL buffer space while the
 * buffers hold WAL not yet written waits for the WAL writer (`LWLock:WALWrite`), and the WAL writer waits for
 * the disk: during a checkpoint's writeback, or on a busy disk, for hundreds of milliseconds, while the batch
 * holds its 1,000 row locks. A batch commits without waiting for the flush (recovery.ts), so nothing else
 * slows a recovery down when the disk falls behind; starting the next batch only once the flush has caught
 * up moves that wait to between batches, where nothing is locked, and stops piling WAL onto a disk that
 * live executors' synchronous commits are queued on. Measured with the disk kept busy by a writer
 * (bench/busyDisk.ts, bench/README.md): at 1M orphans batches over 100 ms fell from 128–135 to 23–24 of
 * 1,001, for a recovery a third longer; a stall that starts mid-batch still holds that batch (the longest
 * were 609–731 ms against 801–869). On a quiet disk the recovery waits a few ms now and then.
 */

/** The longest wait before one batch: a disk stalled for longer gets the next batch anyway (progress). */
export const FLUSH_WAIT_MAX_MS = 1_000;
/** Poll interval while waiting; each poll is its own short statement, no connection is held across it. */
export const FLUSH_POLL_MS = 5;

/** WAL positions (bytes since 0/0) when a statement ended. */
export interface WalPosition {
  /** Where WAL has been inserted up to. */
  insert: number;
  /** Where it is on disk up to. */
  flush: number;
}

/** SQL columns `wal_insert` and `wal_flush` (float8, exact to 2^53 bytes, so they arrive as numbers). */
export const WAL_POSITION_COLUMNS = `pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8 AS wal_insert,
            pg_wal_lsn_diff(pg_current_wal_flush_lsn(), '0/0')::float8 AS wal_flush`;

/**
 * The disk is behind when the WAL of the batch before this one is still not flushed a whole batch later.
 * A healthy disk flushes each batch's WAL (about 1 MB) within a few ms of its asynchronous commit, so this
 * never holds on a quiet disk; waiting on a mere lag would make every batch pay for its own flush again.
 */
export function flushBehind(previousEnd: WalPosition | undefined, now: WalPosition): boolean {
  return previousEnd !== undefined && now.flush < previousEnd.insert;
}

export async function readWalPosition(db: Db): Promise<WalPosition> {
  const res = await db.query<{ wal_insert: number; wal_flush: number }>(`SELECT ${WAL_POSITION_COLUMNS}`, [], 'wal.position');
  const row = res.rows[0];
  return { insert: row?.wal_insert ?? 0, flush: row?.wal_flush ?? 0 };
}

/**
 * When the disk is behind (`flushBehind`), waits until the flush has reached the end of this batch's WAL,
 * re-reading it every `pollMs`, for at most `maxMs` or until `shouldStop` says so. Returns how long it
 * waited, in ms (0 when the disk was not behind).
 */
export async function waitForWalFlush(
  read: () => Promise<WalPosition>,
  previousEnd: WalPosition | undefined,
  now: WalPosition,
  opts: { maxMs?: number; pollMs?: number; shouldStop?: () => boolean } = {},
): Promise<number> {
  if (!flushBehind(previousEnd, now)) return 0;
  const maxMs = opts.maxMs ?? FLUSH_WAIT_MAX_MS;
  const pollMs = opts.pollMs ?? FLUSH_POLL_MS;
  const started = performance.now();
  for (;;) {
    if (opts.shouldStop?.()) break;
    const left = maxMs - (performance.now() - started);
    if (left <= 0) break;
    await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, left)));
    if ((await read()).flush >= now.insert) break;
  }
  return performance.now() - started;
}
