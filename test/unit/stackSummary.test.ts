import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { summary } from '../../scripts/stack/summary.js';
import type { Stack } from '../../scripts/stack/index.js';
import { loadConfig } from '../../shared/config/index.js';
import { executorOptionsFromEnv } from '../../packages/executor/src/executor/env.js';

/** npm start's summary prints the user's URLs masked and the stack's own throwaway ones whole. */
describe('npm start summary', () => {
  it("npm start's summary masks the user's DATABASE_URL and REDIS_URL, keeps the stack's own", () => {
    const st = (postgres: Stack['postgres'], redis: Stack['redis']) =>
      ({
        applicationName: 'app',
        applicationNameDefaulted: false,
        postgres,
        redis,
        pubsub: { kind: 'bridge', url: 'http://127.0.0.1:1', reason: 'test' },
        project: 'p',
        deathTopic: 't',
        deadLetterTopic: 'd',
        functions: [],
        scheduler: undefined,
      }) as unknown as Stack;
    const user = summary(
      st(
        { kind: 'external', url: 'postgres://u:p@ss w"rd@db:5432/x' } as Stack['postgres'],
        { kind: 'external', url: 'redis://:r3d1s@cache:6379' } as Stack['redis'],
      ),
      1,
    );
    expect(user).not.toMatch(/p@ss|w"rd|r3d1s/);
    expect(user).toContain("export DATABASE_URL='postgres://u:***@db:5432/x'");
    const own = summary(
      st(
        {
          kind: 'embedded',
          url: 'postgres://postgres:postgres@127.0.0.1:5/afterlife',
          dataDir: join(tmpdir(), 'afterlife-stack-x'),
        } as Stack['postgres'],
        { kind: 'local', url: 'redis://127.0.0.1:6' } as Stack['redis'],
      ),
      1,
    );
    expect(own).toContain("export DATABASE_URL='postgres://postgres:postgres@127.0.0.1:5/afterlife'");
  });

  it('prints an export line an executor with the kit and the CLI can both use, custom key prefix and schema included', () => {
    const st = {
      applicationName: 'shop',
      applicationNameDefaulted: false,
      postgres: {
        kind: 'embedded',
        url: 'postgres://postgres:postgres@127.0.0.1:5/afterlife',
        dataDir: join(tmpdir(), 'afterlife-stack-y'),
      },
      redis: { kind: 'local', url: 'redis://127.0.0.1:6' },
      pubsub: { kind: 'bridge', url: 'http://127.0.0.1:1', reason: 'test' },
      project: 'p',
      deathTopic: 'executor-deaths',
      deadLetterTopic: 'd',
      functions: [],
      scheduler: undefined,
      env: { REDIS_KEY_PREFIX: 'team-a', AFTERLIFE_SCHEMA: 'al', DBOS_SYSTEM_SCHEMA: 'dbos' },
    } as unknown as Stack;
    const line = /^ {2}(export .*)$/m.exec(summary(st, 1))?.[1] ?? '';
    // What a shell makes of it.
    const env = Object.fromEntries([...line.matchAll(/([A-Z_]+)='([^']*)'/g)].map((m) => [m[1] ?? '', m[2] ?? '']));
    const kit = executorOptionsFromEnv(env);
    expect(kit.databaseUrl).toMatch(/^postgres:\/\/postgres:postgres@127\.0\.0\.1:5\/afterlife\?options=/);
    expect(kit).toMatchObject({ redisUrl: 'redis://127.0.0.1:6', keyPrefix: 'team-a', afterlifeSchema: 'al' });
    const cli = loadConfig(env);
    expect(cli.redis?.keyPrefix).toBe('team-a');
    expect(cli.afterlifeSchema).toBe('al');
    expect(cli.applicationName).toBe('shop');
    // A default is not repeated.
    expect(line).not.toContain('DBOS_SYSTEM_SCHEMA');
  });
});
