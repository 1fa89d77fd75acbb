import { describe, expect, it } from 'vitest';
import { absenceMeans, isStale, judgeKit, type RuleSettings, streakIsDeath } from '../../shared/reaper/deathRule.js';

/** The death rule as a table: each row is one tick's evidence for one executor with the kit. */
const now = 1_000_000;
const settled: RuleSettings = { nowMs: now, intervalMs: 250, ttlMs: 15_000, redisKeptKeysMs: 3_600_000 };
const fresh = { present: true as const, beatAt: now - 100, beatEveryMs: 250 };
const stale = { present: true as const, beatAt: now - 600, beatEveryMs: 250 };
const absent = { present: false as const };

describe('death rule', () => {
  it('a held lock is life, whatever Redis says', () => {
    for (const beat of [fresh, stale, absent, undefined]) expect(judgeKit({ lock: 'held', beat }, settled)).toBe('alive');
  });

  it('a free lock is a suspect only with a stale beat (older than two of the writer’s intervals) or no key', () => {
    expect(judgeKit({ lock: 'free', beat: fresh }, settled)).toBe('alive');
    expect(judgeKit({ lock: 'free', beat: stale }, settled)).toBe('suspect-liveness');
    expect(judgeKit({ lock: 'free', beat: absent }, settled)).toBe('suspect-liveness');
    // The writer's own interval wins over the reaper's setting: a kit beating every second is fresh at 1.5 s.
    expect(judgeKit({ lock: 'free', beat: { present: true, beatAt: now - 1_500, beatEveryMs: 1_000 } }, settled)).toBe('alive');
    // A value that cannot be read still came from a live writer.
    expect(judgeKit({ lock: 'free', beat: { present: true, beatAt: undefined, beatEveryMs: undefined } }, settled)).toBe('alive');
  });

  it('Redis unreachable: no judgement, unless the lock is held', () => {
    expect(judgeKit({ lock: 'free', beat: undefined }, settled)).toBe('unknown');
    expect(judgeKit({ lock: 'unavailable', beat: undefined }, settled)).toBe('unknown');
  });

  it('right after a flush or restart a missing key is no evidence, for a TTL', () => {
    const reset = { ...settled, redisKeptKeysMs: 2_000 };
    expect(absenceMeans(reset)).toBe(false);
    expect(judgeKit({ lock: 'free', beat: absent }, reset)).toBe('unknown');
    expect(judgeKit({ lock: 'unavailable', beat: absent }, reset)).toBe('unknown');
    // A beat that is there but old is still evidence.
    expect(judgeKit({ lock: 'free', beat: stale }, reset)).toBe('suspect-liveness');
    expect(absenceMeans({ ...settled, redisKeptKeysMs: undefined })).toBe(false);
  });

  it('without lock evidence the heartbeat decides alone: only an absent key is a suspect', () => {
    expect(judgeKit({ lock: 'unavailable', beat: absent }, settled)).toBe('suspect-heartbeat');
    expect(judgeKit({ lock: 'unavailable', beat: stale }, settled)).toBe('alive');
    expect(judgeKit({ lock: 'unavailable', beat: fresh }, settled)).toBe('alive');
  });

  it('a suspect is dead on the second observation; on the heartbeat alone, two intervals apart', () => {
    expect(streakIsDeath('liveness', { absentTicks: 1, absentMs: 10_000 }, 250)).toBe(false);
    expect(streakIsDeath('liveness', { absentTicks: 2, absentMs: 0 }, 250)).toBe(true);
    expect(streakIsDeath('heartbeat', { absentTicks: 2, absentMs: 499 }, 250)).toBe(false);
    expect(streakIsDeath('heartbeat', { absentTicks: 2, absentMs: 500 }, 250)).toBe(true);
  });

  it('the age read on Redis’s clock wins over the writer’s beatAt (a skewed clock decides nothing)', () => {
    // The writer's clock is a second behind: by beatAt the beat looks stale, by Redis's clock it is 100 ms old.
    expect(isStale({ present: true, beatAt: now - 1_100, beatEveryMs: 250, ageMs: 100 }, settled)).toBe(false);
    expect(judgeKit({ lock: 'free', beat: { present: true, beatAt: now - 1_100, beatEveryMs: 250, ageMs: 100 } }, settled)).toBe('alive');
    expect(isStale({ present: true, beatAt: now, beatEveryMs: 250, ageMs: 600 }, settled)).toBe(true);
  });

  it('stale means two intervals', () => {
    expect(isStale({ present: true, beatAt: now - 499, beatEveryMs: 250 }, settled)).toBe(false);
    expect(isStale({ present: true, beatAt: now - 500, beatEveryMs: 250 }, settled)).toBe(true);
    expect(isStale({ present: true, beatAt: now - 500, beatEveryMs: undefined }, settled)).toBe(true);
  });
});
