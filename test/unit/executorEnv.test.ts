import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../packages/executor/src/errors.js';
import { executorOptionsFromEnv } from '../../packages/executor/src/runtime/env.js';

describe('executorOptionsFromEnv', () => {
  it('maps the environment onto kit options with defaults', () => {
    expect(executorOptionsFromEnv({ DBOS_SYSTEM_DATABASE_URL: 'postgres://h/db' })).toEqual({
      databaseUrl: 'postgres://h/db',
      publisher: 'pubsub',
    });
    expect(
      executorOptionsFromEnv({
        DBOS_SYSTEM_DATABASE_URL: 'postgres://h/db',
        AFTERLIFE_DATABASE_URL: 'postgresql://h/afterlife',
        REDIS_URL: 'redis://r:6379',
        HEARTBEAT_TTL_MS: '3000',
        EXECUTOR_DEATH_TOPIC: 't',
        AFTERLIFE_PUBLISH: 'none',
        AFTERLIFE_SHUTDOWN_GRACE_MS: '9000',
        AFTERLIFE_SHUTDOWN_MARGIN_MS: '0',
        AFTERLIFE_EXIT_AFTER_DRAIN: 'true',
        AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID: 'true',
        UNRELATED: 'x',
      }),
    ).toEqual({
      databaseUrl: 'postgresql://h/afterlife',
      redisUrl: 'redis://r:6379',
      heartbeatTtlMs: 3000,
      topic: 't',
      publisher: 'none',
      shutdownGraceMs: 9000,
      shutdownMarginMs: 0,
      exitAfterPlannedDrain: true,
      allowLocalExecutorId: true,
    });
  });

  it('allows the shared `local` executor ID only when asked to, with an exact true/false', () => {
    const base = { DBOS_SYSTEM_DATABASE_URL: 'postgres://h/db' };
    expect(executorOptionsFromEnv({ ...base, AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID: 'false' }).allowLocalExecutorId).toBe(false);
    expect(executorOptionsFromEnv(base).allowLocalExecutorId).toBeUndefined();
    // Anything but true/false is a mistake worth a startup failure, not a silent refusal or a silent yes.
    expect(() => executorOptionsFromEnv({ ...base, AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID: 'yes' })).toThrow(
      /AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID/,
    );
  });

  it('reports every problem at once', () => {
    const err = (() => {
      try {
        executorOptionsFromEnv({ REDIS_URL: 'http://x', HEARTBEAT_TTL_MS: '10', AFTERLIFE_PUBLISH: 'kafka' });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    const issues = (err as ConfigError).issues.join('\n');
    expect(issues).toMatch(/REDIS_URL/);
    expect(issues).toMatch(/HEARTBEAT_TTL_MS/);
    expect(issues).toMatch(/AFTERLIFE_PUBLISH/);
    // No URL is no error here: attachExecutor takes the one DBOS launched with (test/integration/executor/zeroConfig.test.ts).
    expect(executorOptionsFromEnv({})).toEqual({ publisher: 'pubsub' });
  });
});
