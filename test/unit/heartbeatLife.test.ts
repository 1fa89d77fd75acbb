import { describe, expect, it } from 'vitest';
import type { HeartbeatValue } from '../../packages/executor/src/contract/heartbeat.js';
import { type Beat, type LifeStandard, showsLife } from '../../shared/recovery/alive.js';

/** "Does the heartbeat show life?" as a table: each standard against each thing a read can find. */
const beatAt = '2026-01-01T00:00:10.000Z';
const value = (state: HeartbeatValue['state']): HeartbeatValue => ({
  executorId: 'e',
  applicationName: 'app',
  applicationVersion: 'v1',
  state,
  startedAt: '2026-01-01T00:00:00.000Z',
  beatAt,
  inFlight: 0,
});
const beating = (state: HeartbeatValue['state'], fresh: boolean): Beat => ({
  kind: 'beating',
  reading: { value: value(state), ttlMs: 14_000 },
  value: value(state),
  ageMs: fresh ? 100 : 1_000,
  fresh,
});
const noKey: Beat = { kind: 'silent', why: 'no key' };
const outOfBounds = (state: HeartbeatValue['state']): Beat => ({
  kind: 'silent',
  why: 'no TTL',
  reading: { value: value(state), ttlMs: undefined },
});
const unreadable: Beat = { kind: 'silent', why: 'unreadable value', reading: { value: undefined, ttlMs: 14_000 } };
const noRedis: Beat = { kind: 'unknown', reason: 'no-redis' };
const notReady: Beat = { kind: 'unknown', reason: 'not-ready' };

describe('showsLife', () => {
  it('a notice: only a beat inside the bounds saying alive, and fresh when the kit’s lock is the witness', () => {
    const tracked: LifeStandard = { of: 'notice', livenessTracked: true };
    const untracked: LifeStandard = { of: 'notice', livenessTracked: false };
    expect(showsLife(beating('alive', true), tracked)).toBe(true);
    expect(showsLife(beating('alive', false), tracked)).toBe(false);
    expect(showsLife(beating('alive', false), untracked)).toBe(true);
    expect(showsLife(beating('draining', true), untracked)).toBe(false);
    for (const b of [noKey, outOfBounds('alive'), unreadable, noRedis, notReady]) expect(showsLife(b, untracked)).toBe(false);
  });

  it('an operator: only evidence of death goes ahead — no key, or drained; unreadable Redis is unknown', () => {
    const op: LifeStandard = { of: 'operator' };
    expect(showsLife(noKey, op)).toBe(false);
    expect(showsLife(beating('drained', true), op)).toBe(false);
    expect(showsLife(outOfBounds('drained'), op)).toBe(false);
    expect(showsLife(beating('draining', false), op)).toBe(true);
    expect(showsLife(outOfBounds('alive'), op)).toBe(true);
    expect(showsLife(unreadable, op)).toBe(true);
    expect(showsLife(noRedis, op)).toBe('unknown');
    expect(showsLife(notReady, op)).toBe('unknown');
  });

  it('a recovery: a fresh beat, or one newer than the stale beat the declaration saw; no REDIS_URL is no heartbeat', () => {
    const blind: LifeStandard = { of: 'recovery', staleBeatAt: undefined };
    expect(showsLife(beating('drained', false), blind)).toBe(true);
    expect(showsLife(beating('alive', false), { of: 'recovery', staleBeatAt: '2026-01-01T00:00:09.000Z' })).toBe(true);
    expect(showsLife(beating('alive', false), { of: 'recovery', staleBeatAt: beatAt })).toBe(false);
    // An old staleBeatAt only narrows the death: a fresh beat is life whatever it says.
    expect(showsLife(beating('alive', true), { of: 'recovery', staleBeatAt: '2027-01-01T00:00:00.000Z' })).toBe(true);
    expect(showsLife(outOfBounds('alive'), blind)).toBe(false);
    expect(showsLife(noKey, blind)).toBe(false);
    expect(showsLife(noRedis, blind)).toBe(false);
    expect(showsLife(notReady, blind)).toBe('unknown');
    expect(showsLife({ kind: 'unknown', reason: 'read-failed' }, blind)).toBe('unknown');
  });
});
