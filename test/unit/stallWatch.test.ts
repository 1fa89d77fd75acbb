import { describe, expect, it } from 'vitest';
import { LIVENESS_RENEW_EVERY_MS } from '../../packages/executor/src/contract/lease.js';
import { STALL_CHECK_EVERY_MS, StallWatch, stallThresholdMs } from '../../packages/executor/src/runtime/stall.js';

/** The kit's own clock on its lease (runtime/stall.ts), on a clock the test moves. */
describe('stall watch', () => {
  const watch = (leaseMs = 8_000) => {
    let t = 0;
    const stalls: number[] = [];
    const w = new StallWatch({ leaseMs: () => leaseMs, onStall: (ms) => stalls.push(ms), now: () => t });
    w.start();
    w.stop(); // the test drives look() itself
    return { w, stalls, advance: (ms: number) => (t += ms) };
  };

  it('a stop of the lease minus one renewal is one; the 5 s freeze the lease is sized for is not', () => {
    expect(stallThresholdMs(8_000)).toBe(8_000 - LIVENESS_RENEW_EVERY_MS);
    const { w, stalls, advance } = watch();
    advance(STALL_CHECK_EVERY_MS + 5_000);
    w.look();
    advance(STALL_CHECK_EVERY_MS + 1_500); // a late timer on a loaded host
    w.look();
    expect(stalls).toEqual([]);
    advance(STALL_CHECK_EVERY_MS + stallThresholdMs(8_000));
    w.look();
    expect(stalls).toEqual([stallThresholdMs(8_000)]);
  });

  it('fires once, and follows a shorter lease the database set', () => {
    const { w, stalls, advance } = watch(3_000);
    advance(STALL_CHECK_EVERY_MS + 2_500);
    w.look();
    advance(STALL_CHECK_EVERY_MS + 2_500);
    w.look();
    expect(stalls).toEqual([2_500]);
  });
});
