import { describe, expect, it } from 'vitest';
import { formatLogLine, maskSecrets } from '../../packages/executor/src/log.js';

/** Credentials never reach a log line, whatever their spelling; errors are serialised, not logged as {}. */
describe('log lines mask secrets', () => {
  it.each([
    ['a raw @', 'postgres://u:p@ss@db.internal:5432/x', 'p@ss'],
    ['a quote', 'postgres://u:pa"ss@db.internal/x', 'pa"ss'],
    ['a space', 'postgres://u:pa ss@db.internal/x', 'pa ss'],
    ['?password=', 'postgresql://db.internal/x?user=u&password=s3cret&sslmode=require', 's3cret'],
    ['libpq keywords', 'host=db.internal password=s3cret user=u', 's3cret'],
    ['a Redis AUTH', 'rediss://default:hunter2@10.0.0.3:6378', 'hunter2'],
  ])('a password with %s is masked in a log line', (_what, url, secret) => {
    const line = formatLogLine({
      severity: 'ERROR',
      message: `cannot connect to ${url}`,
      time: 't',
      err: new Error(`connect ${url} failed`),
    });
    expect(line).not.toContain(secret.replace(/"/g, '\\"'));
    expect(line).not.toContain(secret);
    expect(maskSecrets(url)).not.toContain(secret);
  });
  it('errors are serialised with name, message and code, not as {}', () => {
    const err = Object.assign(new Error('boom'), { code: 'ECONNREFUSED' });
    expect(JSON.parse(formatLogLine({ severity: 'ERROR', message: 'x', time: 't', err }))).toMatchObject({
      err: { name: 'Error', message: 'boom', code: 'ECONNREFUSED' },
    });
  });
});
