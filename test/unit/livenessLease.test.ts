import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../packages/executor/src/errors.js';
import { executorOptionsFromEnv } from '../../packages/executor/src/runtime/env.js';
import { fenceMessage } from '../../packages/executor/src/runtime/fence.js';
import { livenessSessionName } from '../../packages/executor/src/runtime/liveness.js';
import { LogThrottle } from '../../packages/executor/src/runtime/throttle.js';
import { DEFAULT_LIVENESS_LEASE_MS, effectiveLease, MIN_LIVENESS_LEASE_MS } from '../../packages/executor/src/contract/lease.js';
import { livenessLeaseMs } from '../../packages/executor/src/contract/settings.js';

/** The liveness lease as configuration (issue 19): a value the kit cannot keep is an error, never a guess. */
describe('liveness lease configuration', () => {
  const base = { DBOS_SYSTEM_DATABASE_URL: 'postgres://h/db' };

  it('defaults to 8 s and takes a valid value from the environment', () => {
    expect(DEFAULT_LIVENESS_LEASE_MS).toBe(8_000);
    expect(livenessLeaseMs(undefined)).toBe(8_000);
    expect(executorOptionsFromEnv(base).livenessLeaseMs).toBeUndefined();
    expect(executorOptionsFromEnv({ ...base, AFTERLIFE_LIVENESS_LEASE_MS: '12000' }).livenessLeaseMs).toBe(12_000);
  });

  it.each(['0', 'off', '2999', '-8000', '8000.5', '300001', '8s'])('AFTERLIFE_LIVENESS_LEASE_MS=%s is a ConfigError', (v) => {
    expect(() => executorOptionsFromEnv({ ...base, AFTERLIFE_LIVENESS_LEASE_MS: v })).toThrow(ConfigError);
    expect(() => executorOptionsFromEnv({ ...base, AFTERLIFE_LIVENESS_LEASE_MS: v })).toThrow(/AFTERLIFE_LIVENESS_LEASE_MS/);
  });

  it('an unsafe programmatic value is a ConfigError too', () => {
    expect(() => livenessLeaseMs(0)).toThrow(ConfigError);
    expect(() => livenessLeaseMs(1_000)).toThrow(/at least 3000/);
    expect(() => livenessLeaseMs(Number.NaN)).toThrow(ConfigError);
  });

  it('a URL- or role-level idle_session_timeout is never overridden in a way that weakens the lease', () => {
    // None set: the lease.
    expect(effectiveLease(8_000, 0)).toEqual({ leaseMs: 8_000, inherited: 'none' });
    // Shorter and keepable: the operator's stricter choice is kept.
    expect(effectiveLease(8_000, 5_000)).toEqual({ leaseMs: 5_000, inherited: 'kept' });
    // Longer (or off): the lease, which is stricter.
    expect(effectiveLease(8_000, 60_000)).toEqual({ leaseMs: 8_000, inherited: 'longer' });
    // Too short for a 1 s fence cadence: refused, loudly, in favour of the configured lease.
    expect(effectiveLease(8_000, MIN_LIVENESS_LEASE_MS - 1)).toEqual({ leaseMs: 8_000, inherited: 'unsafe' });
  });
});

describe('incarnations and the fence message', () => {
  it('names the incarnation in the liveness session, within 63 bytes', () => {
    expect(livenessSessionName('cut', 'a1b2c3d4e5f6')).toBe('afterlife_live_cut@a1b2c3d4e5f6');
    expect(livenessSessionName('x'.repeat(100), 'a1b2c3d4e5f6')).toHaveLength(63);
    expect(livenessSessionName('x'.repeat(100), 'a1b2c3d4e5f6').endsWith('@a1b2c3d4e5f6')).toBe(true);
    expect(livenessSessionName('cut', undefined)).toBe('afterlife_live_cut');
  });

  it('says what really happened', () => {
    expect(fenceMessage({ verdict: 'dead', reason: 'heartbeat-lapsed', detectedBy: 'reaper-1' })).toMatch(
      /declared dead by reaper-1, because it was silent for longer than its liveness lease/,
    );
    expect(fenceMessage({ verdict: 'superseded', incarnation: 'ffff' })).toMatch(
      /newer process started with this executor ID \(incarnation ffff/,
    );
    expect(fenceMessage({ verdict: 'moved', moved: 3, detectedBy: 'cli' })).toMatch(/moved 3 of this executor's workflows/);
  });
});

describe('LogThrottle', () => {
  it('lets one line a window through and counts the rest', () => {
    let t = 0;
    const th = new LogThrottle(60_000, () => t);
    expect(th.pass('k')).toEqual({ log: true, suppressed: 0 });
    for (let i = 0; i < 100; i++) {
      t += 500;
      th.pass('k');
    }
    expect(th.pass('k')).toEqual({ log: false });
    t = 60_000;
    expect(th.pass('k')).toEqual({ log: true, suppressed: 101 });
    th.clear('k');
    expect(th.pass('k')).toEqual({ log: true, suppressed: 0 });
  });
});
