import { describe, expect, it } from 'vitest';
import { flushBehind, waitForWalFlush, type WalPosition } from '../../shared/dbos/walFlush.js';

/**
 * The decision between recovery batches: wait only when the previous batch's WAL is still not on disk when
 * the next one ends, then until this batch's WAL is, for a bounded time. The positions are scripted (what
 * Postgres would answer, in order); the batches' positions come from a real server in
 * test/integration/executorDeath/durability.test.ts.
 */
const MB = 1024 * 1024;
const at = (insertMb: number, flushMb: number): WalPosition => ({ insert: insertMb * MB, flush: flushMb * MB });

describe('waiting for the WAL flush between batches', () => {
  it('is behind only when the batch before this one is not flushed yet', () => {
    expect(flushBehind(undefined, at(2, 1))).toBe(false);
    // Only this batch's own WAL is unflushed: a healthy disk, no wait.
    expect(flushBehind(at(1, 0.5), at(2, 1))).toBe(false);
    expect(flushBehind(at(1, 0.5), at(2, 0.99))).toBe(true);
  });

  it('does not wait, or read, when the disk has kept up', async () => {
    let reads = 0;
    const waited = await waitForWalFlush(async () => (reads++, at(2, 2)), at(1, 0.5), at(2, 1.5));
    expect(waited).toBe(0);
    expect(reads).toBe(0);
  });

  it('waits until the flush reaches the end of this batch', async () => {
    const readings = [at(2.5, 1.2), at(2.6, 1.9), at(2.7, 2)];
    let reads = 0;
    const waited = await waitForWalFlush(async () => readings[reads++] ?? at(3, 3), at(1, 0.5), at(2, 0.8), { pollMs: 2 });
    expect(reads).toBe(3);
    expect(waited).toBeGreaterThan(0);
  });

  it('gives up after maxMs on a flush that stays behind', async () => {
    let reads = 0;
    const waited = await waitForWalFlush(async () => (reads++, at(2, 0.8)), at(1, 0.5), at(2, 0.8), { pollMs: 5, maxMs: 60 });
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
        return at(2, 0.8);
      },
      at(1, 0.5),
      at(2, 0.8),
      { pollMs: 1, maxMs: 5_000, shouldStop: () => stop },
    );
    expect(reads).toBe(1);
    expect(waited).toBeLessThan(1_000);
  });
});
