import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config/index.js';
import { ConfigError } from '../../packages/executor/src/errors.js';
import { describePolicy, enabled } from '../../shared/retention/policy.js';

const base = { DATABASE_URL: 'postgres://u@127.0.0.1:5432/d', DBOS_APPLICATION_NAME: 'app' };

describe('retention settings', () => {
  it('are off unless set, and 0 means off', () => {
    const off = loadConfig(base);
    expect(off.retention).toEqual({ maxCompleted: undefined, maxAgeMs: undefined, globalTimeoutMs: undefined });
    expect(enabled(off.retention)).toBe(false);
    expect(describePolicy(off.retention, String)).toMatch(/retention: OFF — nothing is deleted.*global timeout: OFF/);
    const zero = loadConfig({ ...base, RETENTION_MAX_COMPLETED: '0', RETENTION_MAX_AGE_MS: '0', WORKFLOW_GLOBAL_TIMEOUT_MS: '0' });
    expect(enabled(zero.retention)).toBe(false);
  });

  it('reads the three names', () => {
    const c = loadConfig({
      ...base,
      RETENTION_MAX_COMPLETED: '1000000',
      RETENTION_MAX_AGE_MS: '2592000000',
      WORKFLOW_GLOBAL_TIMEOUT_MS: '86400000',
    });
    expect(c.retention).toEqual({ maxCompleted: 1_000_000, maxAgeMs: 2_592_000_000, globalTimeoutMs: 86_400_000 });
    expect(describePolicy(c.retention, (ms) => `${ms}ms`)).toBe(
      'retention: keep the newest 1,000,000 completed workflows and delete completed workflows older than 2592000000ms; global timeout: cancel workflows not completed 86400000ms after creation',
    );
  });

  it.each(['-1', '1e6', '0x10', ' 5', '5.0', 'forever'])('rejects %j with a ConfigError naming the variable', (bad) => {
    for (const key of ['RETENTION_MAX_COMPLETED', 'RETENTION_MAX_AGE_MS', 'WORKFLOW_GLOBAL_TIMEOUT_MS']) {
      expect(() => loadConfig({ ...base, [key]: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ ...base, [key]: bad })).toThrow(new RegExp(key));
    }
  });
});
