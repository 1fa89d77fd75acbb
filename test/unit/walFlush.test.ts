import { describe, expect, it } from 'vitest';
import { FLUSH_LAG_SHARE, flushBehind, waitForWalFlush, type WalFlushLag } from '../../shared/dbos/walFlush.js';

/**
 * The decision between recovery batches: wait while the WAL flush lags more than a share of wal_buffers,
 * re-reading it, for a bounded time. The readings are scripted (what Postgres would answer, in order); the
 * batches' readings come from a real server in test/integration/executorDeath/durability.test.ts.
 */
const MB = 1024 * 1024;
const lag = (mb: number): WalFlushLag => ({ lagBytes: mb * MB, buffersBytes: 4 * MB });

describe('waiting for the WAL flush between batches', () => {
  it('is behind only past the share of wal_buffers', () => {
    expect(flushBehind(lag(4 * FLUSH_LAG_SHARE))).toBe(false);
    expect(flushBehind(lag(4 * FLUSH_LAG_SHARE + 0.01))).toBe(true);
  });

  it('does not wait, or read, when the flush has kept up', async () => {
    let reads = 0;
    const waited = await waitForWalFlush(async () => (reads++, lag(0)), lag(1));
    expect(waited).toBe(0);
    expect(reads).toBe(0);
  });

  it('waits until a reading shows the flush caught up', async () => {
    const readings = [lag(3.5), lag(3), lag(0.5)];
    let reads = 0;
    const waited = await waitForWalFlush(async () => readings[reads++] ?? lag(0), lag(3.9), { pollMs: 2 });
    expect(reads).toBe(3);
    expect(waited).toBeGreaterThan(0);
  });

  it('gives up after maxMs on a flush that stays behind', async () => {
    let reads = 0;
    const waited = await waitForWalFlush(async () => (reads++, lag(3.9)), lag(3.9), { pollMs: 5, maxMs: 60 });
    expect(waited).toBeGreaterThanOrEqual(55);
    expect(waited).toBeLessThan(1_000);
    expect(reads).toBeGreaterThan(1);
  });

  it('stops waiting when the recovery must stop (lock lost, shutdown, budget)', async () => {
    let stop = false;
    let reads = 0;
    const waited = await waitForWalFlush(
      async () => {
        reads++;
        stop = true;
        return lag(3.9);
      },
      lag(3.9),
      { pollMs: 1, maxMs: 5_000, shouldStop: () => stop },
    );
    expect(reads).toBe(1);
    expect(waited).toBeLessThan(1_000);
  });
});
