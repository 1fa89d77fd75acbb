import { createGcpLoggingPinoConfig } from '@google-cloud/pino-logging-gcp-config';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { consoleLogger, formatLogLine, type Logger } from '../../packages/executor/src/log.js';
import { pinoConsoleLogger } from '../../shared/log/pinoLogger.js';

/**
 * The kit's hand-written logger writes what Google's own pino configuration for Cloud Logging writes (run
 * here as a devDependency on the same input), and masks credentials; the plane's pino logger writes the
 * kit's lines byte for byte (issue 28: the kit carries no pino).
 */
function capture(): { write(s: string): boolean; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, write: (s: string) => (lines.push(JSON.parse(s) as Record<string, unknown>), true) };
}

describe('cloud logging fields', () => {
  it('match @google-cloud/pino-logging-gcp-config field for field (severity, message, timestamp, insertId, stack_trace, serviceContext)', () => {
    const ours = capture();
    const google = capture();
    const serviceContext = { service: 'reaper', version: 'r1' };
    const log = consoleLogger({}, 'DEBUG', { destination: ours, serviceContext });
    const g = pino(
      createGcpLoggingPinoConfig({ serviceContext, traceGoogleCloudProjectId: '', inihibitDiagnosticMessage: true }, { level: 'debug' }),
      google as pino.DestinationStream,
    );
    const err = new Error('boom');
    for (const [mine, theirs] of [
      [() => log.debug('d', { event: 'x' }), () => g.debug({ event: 'x' }, 'd')],
      [() => log.info('i', { event: 'x' }), () => g.info({ event: 'x' }, 'i')],
      [() => log.warn('w'), () => g.warn('w')],
      [() => log.error('e', { err }), () => g.error({ err }, 'e')],
    ] as const) {
      mine();
      theirs();
    }
    expect(ours.lines).toHaveLength(4);
    ours.lines.forEach((line, i) => {
      const theirs = google.lines[i] ?? {};
      expect(line.severity).toBe(theirs.severity);
      expect(line.message).toBe(theirs.message);
      expect(line.level).toBe(theirs.level);
      expect(Object.keys(line.timestamp as object)).toEqual(Object.keys(theirs.timestamp as object));
      expect(typeof line['logging.googleapis.com/insertId']).toBe('string');
      expect(line.event).toBe(theirs.event);
      expect('stack_trace' in line).toBe('stack_trace' in theirs);
    });
    // Error Reporting: the stack and the service, on the error line.
    expect(ours.lines[3]).toMatchObject({ stack_trace: err.stack, serviceContext });
    expect(google.lines[3]).toMatchObject({ stack_trace: err.stack, serviceContext });
  });

  it('writes NOTICE, which pino lacks, between INFO and WARNING, and honours the minimum', () => {
    const out = capture();
    const log = consoleLogger({ component: 'c' }, 'NOTICE', { destination: out });
    log.info('hidden');
    log.notice('shown', { event: 'executor_dead' });
    log.warn('also');
    expect(out.lines.map((l) => [l.severity, l.level])).toEqual([
      ['NOTICE', 35],
      ['WARNING', 40],
    ]);
    expect(out.lines[0]).toMatchObject({ component: 'c', event: 'executor_dead', message: 'shown' });
  });

  it('labels every line, merges a child’s fields without repeating a key, and serialises errors as before', () => {
    const chunks: string[] = [];
    const log = consoleLogger({ component: 'afterlife', fn: 'base' }, 'INFO', {
      destination: { write: (s: string) => chunks.push(s) },
      labels: { 'afterlife-app': 'demo' },
    });
    log.child({ fn: 'reaper' }).info('m', { fn: 'call', err: Object.assign(new Error('x'), { code: 'E1' }), cause: new Error('y') });
    const raw = chunks[0] ?? '';
    expect(raw.match(/"fn":/g)).toHaveLength(1);
    expect(JSON.parse(raw)).toMatchObject({
      fn: 'call',
      'logging.googleapis.com/labels': { 'afterlife-app': 'demo' },
      err: { name: 'Error', message: 'x', code: 'E1' },
      cause: { name: 'Error', message: 'y' },
    });
  });

  it('masks credentials in URLs on the serialised line, message, fields and stack alike', () => {
    const chunks: string[] = [];
    const log = consoleLogger({}, 'INFO', { destination: { write: (s: string) => chunks.push(s) } });
    const url = 'postgres://afterlife:s3cret@10.0.0.3:5432/dbos';
    log.error(`connect failed for ${url}`, {
      redis: 'redis://:hunter2@10.0.0.4:6379',
      err: new Error(`connect ${url} failed`),
      dsn: 'host=h password=pw1 user=u',
    });
    const out = chunks.join('');
    expect(out).not.toMatch(/s3cret|hunter2|pw1/);
    expect(out).toContain('postgres://afterlife:***@10.0.0.3:5432/dbos');
    expect(JSON.parse(out).stack_trace).toContain('afterlife:***@');
    // The same mask as the sink logger's formatLogLine.
    expect(formatLogLine({ severity: 'INFO', message: url, time: 't' })).toContain('afterlife:***@');
  });

  it('the kit’s hand-written lines are the plane’s pino lines, byte for byte but the clock and the insertId', () => {
    const kit: string[] = [];
    const plane: string[] = [];
    const o = { labels: { 'afterlife-app': 'demo' }, serviceContext: { service: 'reaper', version: 'r1' } };
    const base = { component: 'afterlife', fn: 'base', skipped: undefined, n: 1 };
    const loggers: Array<[Logger, string[]]> = [
      [consoleLogger(base, 'DEBUG', { ...o, destination: { write: (s: string) => kit.push(s) } }), kit],
      [pinoConsoleLogger(base, 'DEBUG', { ...o, destination: { write: (s: string) => plane.push(s) } }), plane],
    ];
    const err = Object.assign(new Error('connect postgres://u:pw@h/db failed'), { code: 'ECONNREFUSED' });
    const circular: Record<string, unknown> = { a: 1, list: [1, 'two', null] };
    circular.self = circular;
    for (const [log] of loggers) {
      log.debug('d', { event: 'x', count: 3, ratio: 0.25, ok: true, none: null, nan: Number.NaN, inf: Infinity });
      log.info('quote "q" and a newline\n', { event: 'e', at: new Date(0), nested: { deep: { deeper: [1, { x: 'y' }] } } });
      log.notice('n', { big: 10n, cause: new Error('inner'), fn: 'call' });
      log.warn('w', { url: 'redis://:hunter2@10.0.0.4:6379', dsn: 'host=h password=pw1' });
      log.error('e', { err, circular, dropped: undefined, callback: () => 1 });
      log.child({ fn: 'child', c: 1 }).info('from a child', { c: 2, d: 3 });
      log.child({ err: new Error('bound') }).error('bound error');
      log.info('plain');
    }
    const strip = (l: string) => l.replace(/"timestamp":\{[^}]*\}/, 'T').replace(/"logging\.googleapis\.com\/insertId":"[^"]*"/, 'I');
    expect(kit).toHaveLength(8);
    expect(kit.map(strip)).toEqual(plane.map(strip));
    for (const l of kit) expect(l.endsWith('}\n')).toBe(true);
    expect(kit.join('')).not.toMatch(/hunter2|pw1|:pw@/);
  });
});
