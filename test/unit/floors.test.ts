import { describe, expect, it } from 'vitest';
import { FLOORS } from '../../shared/config/bounds.js';
import { loadConfig } from '../../shared/config/index.js';
import { ConfigError } from '../../packages/executor/src/errors.js';

/**
 * Issue 30: thresholds that cancel or delete had no floor. `WORKFLOW_GLOBAL_TIMEOUT_MS=60` cancelled all
 * in-flight work on the first tick, `RETENTION_MAX_AGE_MS=30` was accepted, and `STUCK_AFTER_MS=1000` with
 * `cancel-and-repair` cancelled a live workflow during a 4 s step. Each is now refused at start, unless
 * AFTERLIFE_ALLOW_BELOW_FLOOR names the variable; then the config carries a WARNING line for every start.
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

describe('floors of the thresholds that cancel or delete', () => {
  it.each([
    [{ WORKFLOW_GLOBAL_TIMEOUT_MS: '60' }, 'WORKFLOW_GLOBAL_TIMEOUT_MS'],
    [{ RETENTION_MAX_AGE_MS: '30' }, 'RETENTION_MAX_AGE_MS'],
    [{ RETENTION_MAX_COMPLETED: '10' }, 'RETENTION_MAX_COMPLETED'],
    [{ STUCK_AFTER_MS: '1000', STUCK_POLICY: 'cancel-and-repair' }, 'STUCK_AFTER_MS'],
    [{ STUCK_AFTER_MS: '1000', STUCK_POLICY: 'cancel-and-fork' }, 'STUCK_AFTER_MS'],
  ])('the audit’s %j is refused at start, naming the variable, its floor and the override', (env, key) => {
    const got = issues(env);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatch(new RegExp(`^${key}: .*below its floor of \\d+.*AFTERLIFE_ALLOW_BELOW_FLOOR=${key}`));
  });

  it('every floor holds at its value and one below it is refused; off (0) and a reporting policy have no floor', () => {
    for (const f of FLOORS) {
      const extra: Record<string, string> = f.variable === 'STUCK_AFTER_MS' ? { STUCK_POLICY: 'cancel-and-fork' } : {};
      expect(issues({ [f.variable]: String(f.floor), ...extra })).toEqual([]);
      expect(issues({ [f.variable]: String(f.floor - 1), ...extra })).toHaveLength(1);
    }
    expect(issues({ WORKFLOW_GLOBAL_TIMEOUT_MS: '0', RETENTION_MAX_AGE_MS: '0', RETENTION_MAX_COMPLETED: '0' })).toEqual([]);
    expect(issues({ STUCK_AFTER_MS: '1000', STUCK_POLICY: 'report' })).toEqual([]);
  });

  it('the override names what the operator means; the config carries a WARNING line for each start', () => {
    const c = loadConfig({
      ...base,
      WORKFLOW_GLOBAL_TIMEOUT_MS: '60000',
      STUCK_AFTER_MS: '60000',
      STUCK_POLICY: 'cancel-and-repair',
      AFTERLIFE_ALLOW_BELOW_FLOOR: 'WORKFLOW_GLOBAL_TIMEOUT_MS, STUCK_AFTER_MS',
    });
    expect(c.retention.globalTimeoutMs).toBe(60_000);
    expect(c.belowFloor).toHaveLength(2);
    expect(c.belowFloor.join('\n')).toMatch(/WORKFLOW_GLOBAL_TIMEOUT_MS=60000 is below its floor.*allowed by AFTERLIFE_ALLOW_BELOW_FLOOR/);
    expect(loadConfig(base).belowFloor).toEqual([]);
    // Naming one variable does not open the others.
    expect(
      issues({ RETENTION_MAX_AGE_MS: '30', WORKFLOW_GLOBAL_TIMEOUT_MS: '60', AFTERLIFE_ALLOW_BELOW_FLOOR: 'RETENTION_MAX_AGE_MS' }),
    ).toEqual([expect.stringMatching(/^WORKFLOW_GLOBAL_TIMEOUT_MS: /)]);
  });

  it('an override naming anything but a floored variable is an error', () => {
    expect(issues({ AFTERLIFE_ALLOW_BELOW_FLOOR: 'ALL' })).toEqual([
      expect.stringMatching(/^AFTERLIFE_ALLOW_BELOW_FLOOR: must name variables with a floor/),
    ]);
    expect(issues({ AFTERLIFE_ALLOW_BELOW_FLOOR: 'STUCK_AFTER_MS,' })).toHaveLength(1);
  });
});
