import { describe, expect, it } from 'vitest';
import { ReaperRequest } from '../../functions/reaper/handle.js';
import { sessionPrefix } from '../../shared/dbos/reaper.js';
import { stuckSlice } from '../../shared/reaper/tick.js';

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
