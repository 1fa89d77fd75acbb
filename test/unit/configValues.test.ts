import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config/index.js';
import { ConfigError } from '../../packages/executor/src/errors.js';

/** Config values that go into Redis keys, scan patterns and limits are read strictly: a doubt is an error. */
const base = { DATABASE_URL: 'postgres://h/db', DBOS_APPLICATION_NAME: 'app' };
const configProblem = (env: Record<string, string>) => {
  try {
    loadConfig({ ...base, ...env });
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.join('\n');
  }
};

describe('config: names and numbers that go into keys, patterns and limits', () => {
  it.each(['0x10', '1e3', ' 16', '16 ', '16.0', '+16', '016', '1_000'])('RECOVERY_BATCH_SIZE=%j is rejected, not read as a number', (v) => {
    expect(configProblem({ RECOVERY_BATCH_SIZE: v })).toMatch(/RECOVERY_BATCH_SIZE: must be a plain decimal integer/);
  });
  it('a plain decimal is read as itself', () => {
    expect(loadConfig({ ...base, RECOVERY_BATCH_SIZE: '16' }).recovery.batchSize).toBe(16);
  });
  it.each(['af*', 'a:b', 'a b', 'a?', '[a]', ''.padEnd(65, 'x')])('REDIS_KEY_PREFIX=%j is rejected', (v) => {
    expect(configProblem({ REDIS_URL: 'redis://h', REDIS_KEY_PREFIX: v })).toMatch(/REDIS_KEY_PREFIX/);
  });
  it.each(['a:b', 'app*', 'a\u0000b', 'a\nb', 'a[1]'])('DBOS_APPLICATION_NAME=%j is rejected', (v) => {
    expect(configProblem({ DBOS_APPLICATION_NAME: v })).toMatch(/DBOS_APPLICATION_NAME/);
  });
});
