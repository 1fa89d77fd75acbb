import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliLogger } from '../../cli/context.js';
import { summary } from '../../scripts/stack/summary.js';
import type { Stack } from '../../scripts/stack/index.js';
import { loadConfig } from '../../shared/config/index.js';
import { ConfigError } from '../../shared/errors.js';
import { heartbeatPattern } from '../../shared/heartbeat/index.js';
import { formatLogLine, maskSecrets } from '../../shared/log.js';

/** Issue 10, defects 7 and 10: secrets in output, and names that go into keys and patterns. */
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

describe('defect 10: names and numbers that go into keys, patterns and limits', () => {
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
  it('the heartbeat scan pattern escapes the prefix as well as the application', () => {
    expect(heartbeatPattern('app', 'af*')).toBe('af\\*:app:hb:*');
  });
});

describe('defect 7: secrets in logs and in npm start', () => {
  it.each([
    ['a raw @', 'postgres://u:p@ss@db.internal:5432/x', 'p@ss'],
    ['a quote', 'postgres://u:pa"ss@db.internal/x', 'pa"ss'],
    ['a space', 'postgres://u:pa ss@db.internal/x', 'pa ss'],
    ['?password=', 'postgresql://db.internal/x?user=u&password=s3cret&sslmode=require', 's3cret'],
    ['libpq keywords', 'host=db.internal password=s3cret user=u', 's3cret'],
    ['a Redis AUTH', 'rediss://default:hunter2@10.0.0.3:6378', 'hunter2'],
  ])('a password with %s is masked in a log line', (_what, url, secret) => {
    const line = formatLogLine({ severity: 'ERROR', message: `cannot connect to ${url}`, time: 't', err: new Error(`connect ${url} failed`) });
    expect(line).not.toContain(secret.replace(/"/g, '\\"'));
    expect(line).not.toContain(secret);
    expect(maskSecrets(url)).not.toContain(secret);
  });
  it("the CLI's --verbose logger masks and serialises errors like the functions' logger", () => {
    const out: string[] = [];
    const log = cliLogger(true, (l) => out.push(l));
    log.debug('connecting', { url: 'postgres://u:p@ss@db/x', err: Object.assign(new Error('refused by redis://:hunter2@cache'), { code: 'ECONNREFUSED' }) });
    expect(out).toHaveLength(1);
    expect(out[0]).not.toMatch(/p@ss|hunter2/);
    expect(JSON.parse(out[0] ?? '')).toMatchObject({ severity: 'DEBUG', err: { name: 'Error', code: 'ECONNREFUSED' } });
  });
  it('errors are serialised with name, message and code, not as {}', () => {
    const err = Object.assign(new Error('boom'), { code: 'ECONNREFUSED' });
    expect(JSON.parse(formatLogLine({ severity: 'ERROR', message: 'x', time: 't', err }))).toMatchObject({ err: { name: 'Error', message: 'boom', code: 'ECONNREFUSED' } });
  });
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
      st({ kind: 'external', url: 'postgres://u:p@ss w"rd@db:5432/x' } as Stack['postgres'], { kind: 'external', url: 'redis://:r3d1s@cache:6379' } as Stack['redis']),
      1,
    );
    expect(user).not.toMatch(/p@ss|w"rd|r3d1s/);
    expect(user).toContain("export DATABASE_URL='postgres://u:***@db:5432/x'");
    const own = summary(st({ kind: 'embedded', url: 'postgres://postgres:postgres@127.0.0.1:5/afterlife', dataDir: join(tmpdir(), 'afterlife-stack-x') } as Stack['postgres'], { kind: 'local', url: 'redis://127.0.0.1:6' } as Stack['redis']), 1);
    expect(own).toContain("export DATABASE_URL='postgres://postgres:postgres@127.0.0.1:5/afterlife'");
  });
});
