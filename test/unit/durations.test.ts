import { describe, expect, it } from 'vitest';
import { MAX_AGE_MS, MAX_TIMER_MS } from '../../shared/config/bounds.js';
import { CONFIG_KEYS, loadConfig } from '../../shared/config/index.js';
import { ConfigError } from '../../packages/executor/src/errors.js';

/**
 * Issue 30: DB_CONNECT_TIMEOUT_MS=2147483648 made every start fail with a misleading "connection timeout"
 * (Node's timers fire after 1 ms past 2^31−1), LOCK_TTL_MS=2^53−1 extended the lock every millisecond, and
 * REAPER_LEASE_MS below two ticks was accepted at start though docs/configuration.md said it was refused.
 * Each is refused by loadConfig, naming the variable and its bound.
 */
const base = { DATABASE_URL: 'postgres://u@127.0.0.1:5432/d', DBOS_APPLICATION_NAME: 'app' };

function issues(env: Record<string, string>): string[] {
  try {
    loadConfig({ ...base, ...env });
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.issues;
  }
}

describe('durations: timers stay under 2^31−1 ms, relations hold at start', () => {
  it.each([
    ['DB_CONNECT_TIMEOUT_MS', '2147483648'],
    ['LOCK_TTL_MS', String(Number.MAX_SAFE_INTEGER)],
    ['DB_STATEMENT_TIMEOUT_MS', '2147483648'],
  ])('the audit’s %s=%s is refused, naming the variable', (key, value) => {
    const got = issues({ [key]: value });
    expect(got).toHaveLength(1);
    expect(got[0]).toMatch(new RegExp(`^${key}: must be at most \\d+`));
  });

  it('every duration but the two compared with the clock is refused past 2^31−1 ms; those two past a hundred years', () => {
    const durations = CONFIG_KEYS.filter((k) => k.endsWith('_MS'));
    expect(durations.length).toBeGreaterThan(10);
    const clockCompared = new Set(['RETENTION_MAX_AGE_MS', 'WORKFLOW_GLOBAL_TIMEOUT_MS']);
    for (const key of durations) {
      const ceiling = clockCompared.has(key) ? MAX_AGE_MS : MAX_TIMER_MS;
      expect(issues({ [key]: String(ceiling + 1) }).join('\n'), key).toMatch(new RegExp(`^${key}: `));
    }
    // About 3·10^14 ms: accepted before, then every retention pass failed with `timestamp out of range`.
    expect(issues({ RETENTION_MAX_AGE_MS: '300000000000000' })).toEqual([expect.stringMatching(/^RETENTION_MAX_AGE_MS: /)]);
    expect(issues({ RETENTION_MAX_AGE_MS: String(90 * 86_400_000) })).toEqual([]);
  });

  it('the lease must be at least two ticks, at start', () => {
    expect(issues({ REAPER_TICK_MS: '1000', REAPER_LEASE_MS: '1999' })).toEqual([
      'REAPER_LEASE_MS: 1999 must be at least two ticks (2 × REAPER_TICK_MS = 2000)',
    ]);
    expect(issues({ REAPER_TICK_MS: '1000', REAPER_LEASE_MS: '2000' })).toEqual([]);
    // The default tick with the smallest lease the field takes: two ticks exactly.
    expect(issues({ REAPER_LEASE_MS: '500' })).toEqual([]);
  });
});
