import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config/index.js';
import { ConfigError } from '../../packages/executor/src/errors.js';
import { executorOptionsFromEnv } from '../../packages/executor/src/runtime/env.js';
import { attachExecutor } from '../../packages/executor/src/runtime/index.js';

/**
 * Issue 23, observation 9: the functions validate REDIS_KEY_PREFIX (it is part of every Redis key and SCAN
 * pattern) while the kit took any value, so a kit and the plane could disagree on where heartbeats live, or
 * a prefix with `:` or `*` could reach into another application's keys. The kit now refuses what the
 * functions refuse, from the environment and from options alike.
 */
const BAD = ['a:b', 'pre*', 'x y', 'a\u001b[31m', 'p?', '[ab]', 'x'.repeat(65)];

describe('the kit validates REDIS_KEY_PREFIX as the functions do', () => {
  const base = { DBOS_SYSTEM_DATABASE_URL: 'postgres://h/db' };

  it.each(BAD)('the env prefix %j is refused by both', (prefix) => {
    expect(() =>
      loadConfig({ DATABASE_URL: 'postgres://h/db', DBOS_APPLICATION_NAME: 'app', REDIS_URL: 'redis://r:6379', REDIS_KEY_PREFIX: prefix }),
    ).toThrow(ConfigError);
    expect(() => executorOptionsFromEnv({ ...base, REDIS_KEY_PREFIX: prefix })).toThrow(/REDIS_KEY_PREFIX/);
  });

  it('a prefix the functions accept is accepted by the kit', () => {
    expect(executorOptionsFromEnv({ ...base, REDIS_KEY_PREFIX: 'team-a.prod_1' }).keyPrefix).toBe('team-a.prod_1');
  });

  it('attachExecutor refuses a bad keyPrefix option before it touches DBOS or Redis', async () => {
    await expect(attachExecutor({ databaseUrl: 'postgres://h/db', keyPrefix: 'a:b', publisher: 'none', fatal: false })).rejects.toThrow(
      /keyPrefix/,
    );
  });
});
