import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { guardingText, summary } from '../../scripts/stack/summary.js';
import type { Stack } from '../../scripts/stack/index.js';
import { loadConfig } from '../../shared/config/index.js';
import { executorOptionsFromEnv } from '../../packages/executor/src/runtime/env.js';

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

  it("prints the app's line (no application name, its own executor ID per process) and the CLI's, custom key prefix and schema included", () => {
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
    const text = summary(st, 1);
    const [appLine = '', cliLine = ''] = [...text.matchAll(/^ {2}(export .*)$/gm)].map((m) => m[1] ?? '');
    // What a shell makes of them.
    const shell = (line: string) => Object.fromEntries([...line.matchAll(/([A-Z_]+)='([^']*)'/g)].map((m) => [m[1] ?? '', m[2] ?? '']));
    const kit = executorOptionsFromEnv(shell(appLine));
    expect(kit.databaseUrl).toMatch(/^postgres:\/\/postgres:postgres@127\.0\.0\.1:5\/afterlife\?options=/);
    expect(kit).toMatchObject({ redisUrl: 'redis://127.0.0.1:6', keyPrefix: 'team-a', afterlifeSchema: 'al' });
    // The app side sets no application name (the stack guards DBOS's own) and gives each process its ID.
    expect(appLine).not.toMatch(/APPLICATION_NAME|APP_NAME/);
    expect(text).toMatch(/^ {2}DBOS__VMID=worker-1 .*DBOS__VMID=worker-2/m);
    const cli = loadConfig(shell(cliLine));
    expect(cli.redis?.keyPrefix).toBe('team-a');
    expect(cli.afterlifeSchema).toBe('al');
    expect(cli.applicationName).toBe('shop');
    // A default is not repeated.
    expect(appLine + cliLine).not.toContain('DBOS_SYSTEM_SCHEMA');
    // The CLI's command works from any directory: a linked bin or this checkout's absolute path.
    expect(text).toMatch(/^ {2}(afterlife-plane|node '\/[^']+\/dist\/cli\/index\.js') status/m);
  });
});

describe('npm start names an application for a person', () => {
  it('the guarding line escapes the name and kit IDs, and quotes the status command for the shell', () => {
    const text = guardingText({
      applicationName: "shop$(id);x'\u001b]0;t\u0007\nPASS",
      executorIds: ['k\u001b[2K1'],
      functions: [],
      startedInMs: 1_000,
    });
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(text.split('\n')).toHaveLength(2);
    expect(text).toContain('k\\x1b[2K1');
    // What a POSIX shell makes of the printed command's argument: the name, byte for byte (as escaped).
    const arg = /status --app (.*)$/.exec(text)?.[1] ?? '';
    expect(arg).toBe(`'shop$(id);x'\\''\\x1b]0;t\\x07\\nPASS'`);
    expect(guardingText({ applicationName: 'shop$(id)', executorIds: [], functions: [], startedInMs: 0 })).toMatch(
      /status --app 'shop\$\(id\)'$/,
    );
  });

  it('the CLI line says which application it reads, and that the default has no executors of its own', () => {
    const st = {
      applicationName: 'demo',
      applicationNameDefaulted: true,
      postgres: {
        kind: 'embedded',
        url: 'postgres://postgres:postgres@127.0.0.1:5/afterlife',
        dataDir: join(tmpdir(), 'afterlife-stack-z'),
      },
      redis: { kind: 'local', url: 'redis://127.0.0.1:6' },
      pubsub: { kind: 'bridge', url: 'http://127.0.0.1:1', reason: 'test' },
      project: 'p',
      deathTopic: 'executor-deaths',
      deadLetterTopic: 'd',
      functions: [],
      scheduler: undefined,
      env: {},
    } as unknown as Stack;
    expect(summary(st, 1)).toMatch(
      /The CLI, from any directory \(it reads application demo, the stack’s default, which has no executors unless your app is named so; your app's is printed as "its status:"/,
    );
  });
});
