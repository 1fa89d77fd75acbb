import type { Db } from '../db/pool.js';

/**
 * Backpressure on the WAL flush, between recovery batches. A statement that needs WAL buffer space while the
 * buffers hold WAL not yet written waits for the WAL writer (`LWLock:WALWrite`), and the WAL writer waits for
 * the disk: during a checkpoint's writeback, or on a busy disk, for hundreds of milliseconds, while the batch
 * holds its 1,000 row locks. A batch commits without waiting for the flush (recovery.ts), so nothing else
 * slows a recovery down when the disk falls behind; starting the next batch only once the flush has caught
 * up moves that wait to between batches, where nothing is locked. Measured with the disk kept busy by a
 * writer (bench/README.md): batches over 100 ms fell from 114 to 18 of 1,001 at 1M orphans, the longest from
 * 927 ms to 198 ms; on a quiet disk the recovery waits a few ms now and then.
 */

/**
 * Share of `wal_buffers` the flush may lag before the next batch waits. A batch of 1,000 rows writes about
 * 1 MB of WAL (up to 2 MB with full-page images after a checkpoint starts), so at the default 4 MB of
 * buffers half leaves room for one batch while the disk stalls. Lower waits more often on a quiet disk.
 */
export const FLUSH_LAG_SHARE = 0.5;
/** The longest wait before one batch: a disk stalled for longer gets the next batch anyway (progress). */
export const FLUSH_WAIT_MAX_MS = 1_000;
/** Poll interval while waiting; each poll is its own short statement, no connection is held across it. */
export const FLUSH_POLL_MS = 5;

export interface WalFlushLag {
  /** WAL inserted but not yet flushed, in bytes. */
  lagBytes: number;
  /** The server's `wal_buffers`, in bytes. */
  buffersBytes: number;
}

/** SQL columns `wal_lag` and `wal_buffers` (float8, so they arrive as numbers), for a statement's result. */
export const WAL_FLUSH_LAG_COLUMNS = `pg_wal_lsn_diff(pg_current_wal_insert_lsn(), pg_current_wal_flush_lsn())::float8 AS wal_lag,
            pg_size_bytes(current_setting('wal_buffers'))::float8 AS wal_buffers`;

export function flushBehind(lag: WalFlushLag): boolean {
  return lag.lagBytes > lag.buffersBytes * FLUSH_LAG_SHARE;
}

export async function readWalFlushLag(db: Db): Promise<WalFlushLag> {
  const res = await db.query<{ wal_lag: number; wal_buffers: number }>(`SELECT ${WAL_FLUSH_LAG_COLUMNS}`, [], 'wal.flushLag');
  const row = res.rows[0];
  return { lagBytes: row?.wal_lag ?? 0, buffersBytes: row?.wal_buffers ?? 0 };
}

/**
 * Waits while the flush is behind (`flushBehind`), re-reading it every `pollMs`, for at most `maxMs` or until
 * `shouldStop` says so. Returns how long it waited, in ms (0 when the flush was not behind).
 */
export async function waitForWalFlush(
  read: () => Promise<WalFlushLag>,
  first: WalFlushLag,
  opts: { maxMs?: number; pollMs?: number; shouldStop?: () => boolean } = {},
): Promise<number> {
  if (!flushBehind(first)) return 0;
  const maxMs = opts.maxMs ?? FLUSH_WAIT_MAX_MS;
  const pollMs = opts.pollMs ?? FLUSH_POLL_MS;
  const started = performance.now();
  for (;;) {
    if (opts.shouldStop?.()) break;
    const left = maxMs - (performance.now() - started);
    if (left <= 0) break;
    await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, left)));
    if (!flushBehind(await read())) break;
  }
  return performance.now() - started;
}
