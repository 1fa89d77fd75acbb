import { describe, expect, it } from 'vitest';
import { ReaperRequest } from '../../functions/reaper/handle.js';
import { sessionPrefix } from '../../shared/dbos/reaper.js';
import { SWEEP, SWEEP_EVERY_MS, type SweepPart, stuckSlice, sweepSlice } from '../../shared/reaper/tick.js';

describe('stuckSlice', () => {
  const ids = Array.from({ length: 100 }, (_, i) => `exec-${i}`);

  it('examines every executor once per STUCK_AFTER/60, a slice per tick', () => {
    // Default hour, 5 s ticks: a minute = 12 slices; 12 consecutive ticks cover everyone exactly once.
    const seen = new Map<string, number>();
    for (let t = 0; t < 12; t++)
      for (const id of stuckSlice(ids, 1_800_000_000_000 + t * 5_000, 3_600_000, 5_000)) seen.set(id, (seen.get(id) ?? 0) + 1);
    expect(seen.size).toBe(100);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
  });

  it('takes everyone every tick for short thresholds', () => {
    expect(stuckSlice(ids, Date.now(), 60_000, 1_000)).toEqual(ids);
  });
});

describe('sweepSlice', () => {
  /** Ticks every tickMs from t0 for a while; when each part ran, and how many parts each tick took. */
  function sweep(tickMs: number, ticks: number) {
    const sweptAt: Partial<Record<SweepPart, number>> = {};
    const runs = new Map<SweepPart, number[]>(SWEEP.map((p) => [p, []]));
    const perTick: number[] = [];
    const t0 = 1_800_000_000_000;
    for (let i = 0; i < ticks; i++) {
      const now = t0 + i * tickMs;
      const slice = sweepSlice(i === 0 ? undefined : sweptAt, now, tickMs);
      perTick.push(slice.length);
      for (const p of slice) {
        sweptAt[p] = now;
        runs.get(p)?.push(now);
      }
    }
    const gaps = [...runs.values()].flatMap((at) => at.slice(1).map((t, i) => t - (at[i] as number)));
    return { runs, perTick, gaps };
  }

  it("runs the whole sweep on an invocation's first tick", () => {
    expect(sweepSlice(undefined, Date.now(), 250)).toEqual([...SWEEP]);
  });

  it('then spreads it over the ticks of a second: every part once a second, no tick more than its share', () => {
    const { runs, perTick, gaps } = sweep(250, 4 * 60);
    expect(Math.max(...perTick.slice(1))).toBe(Math.ceil(SWEEP.length / 4));
    // Never more often than once a second; once the first second has spread the parts, exactly once a second.
    expect(Math.min(...gaps)).toBe(SWEEP_EVERY_MS);
    for (const at of runs.values()) {
      expect(at.slice(2).every((t, i) => t - (at[i + 1] as number) === SWEEP_EVERY_MS)).toBe(true);
      expect(at.length).toBeGreaterThanOrEqual(59);
    }
  });

  it('keeps the order a tick runs its parts in: stuck before the others, unguarded last', () => {
    const sweptAt = Object.fromEntries(SWEEP.map((p) => [p, 0])) as Record<SweepPart, number>;
    sweptAt.unguarded = -1;
    sweptAt.stuck = 0;
    expect(sweepSlice(sweptAt, SWEEP_EVERY_MS, 250)).toEqual(['stuck', 'unguarded']);
  });

  it('runs every part each tick when a tick is a second or longer', () => {
    const { perTick, gaps } = sweep(1_000, 10);
    expect(perTick.every((n) => n === SWEEP.length)).toBe(true);
    expect(gaps.every((g) => g === 1_000)).toBe(true);
  });
});

describe('sessionPrefix', () => {
  it('is what every DBOS SDK names its pool sessions (TypeScript adds _<version>, Python nothing), cut where Postgres cuts application_name (63 bytes)', () => {
    expect(sessionPrefix('exec-A')).toBe('dbos_transact_exec-A');
    const long = sessionPrefix('x'.repeat(80));
    expect(Buffer.byteLength(long)).toBe(63);
    expect(long.startsWith('dbos_transact_xxx')).toBe(true);
  });
});

describe('ReaperRequest', () => {
  it('accepts the defaults, dryRun and maxTicks, and rejects anything else with a reason', () => {
    expect(ReaperRequest.parse({})).toEqual({});
    expect(ReaperRequest.parse({ dryRun: true, maxTicks: 3 })).toEqual({ dryRun: true, maxTicks: 3 });
    expect(ReaperRequest.safeParse({ dryRun: 'yes' }).success).toBe(false);
    expect(ReaperRequest.safeParse({ maxTicks: 0 }).success).toBe(false);
    expect(ReaperRequest.safeParse({ unknown: 1 }).success).toBe(false);
  });
});
