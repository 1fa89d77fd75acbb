import { describe, expect, it } from 'vitest';
import { formatLogLine, httpTraceFields, makeLogger, traceFields, type LogLine } from '../../packages/executor/src/log.js';

describe('log', () => {
  const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

  it('writes Cloud Logging trace fields from a W3C traceparent', () => {
    expect(traceFields('p1', { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` })).toEqual({
      'logging.googleapis.com/trace': `projects/p1/traces/${TRACE}`,
      'logging.googleapis.com/spanId': '00f067aa0ba902b7',
      'logging.googleapis.com/trace_sampled': true,
    });
  });

  it('reads X-Cloud-Trace-Context, converting its decimal span ID', () => {
    expect(httpTraceFields('p1', { 'x-cloud-trace-context': `${TRACE.toUpperCase()}/255;o=0` })).toEqual({
      'logging.googleapis.com/trace': `projects/p1/traces/${TRACE}`,
      'logging.googleapis.com/spanId': '00000000000000ff',
      'logging.googleapis.com/trace_sampled': false,
    });
  });

  it('ignores malformed or all-zero traces, and writes nothing without a project', () => {
    expect(traceFields('p1', { traceparent: 'garbage' })).toEqual({});
    expect(traceFields('p1', { traceparent: `00-${'0'.repeat(32)}-00f067aa0ba902b7-01` })).toEqual({});
    expect(traceFields('p1', { traceparent: 42, cloudTraceContext: 'nope/1' })).toEqual({});
    expect(traceFields(undefined, { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` })).toEqual({});
    expect(httpTraceFields('p1', undefined)).toEqual({});
  });

  it('emits severity, message and time, honours the minimum, and children carry their fields', () => {
    const lines: LogLine[] = [];
    const log = makeLogger((l) => lines.push(l), { component: 'c' }, 'INFO').child({ fn: 'f' });
    log.debug('hidden');
    log.warn('shown', { event: 'x' });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ component: 'c', fn: 'f', event: 'x', severity: 'WARNING', message: 'shown' });
    expect(Number.isNaN(Date.parse(String(lines[0]?.time)))).toBe(false);
  });

  it('masks credentials in URLs and serialises errors', () => {
    const out = formatLogLine({
      severity: 'ERROR',
      message: 'connect failed for postgres://afterlife:s3cret@10.0.0.3:5432/dbos',
      time: 't',
      redis: 'redis://:hunter2@10.0.0.4:6379',
      err: Object.assign(new Error('boom'), { code: 'ECONNREFUSED' }),
    });
    expect(out).not.toMatch(/s3cret|hunter2/);
    expect(out).toContain('postgres://afterlife:***@10.0.0.3:5432/dbos');
    expect(out).toContain('redis://:***@10.0.0.4:6379');
    expect(JSON.parse(out).err).toEqual({ name: 'Error', message: 'boom', code: 'ECONNREFUSED' });
  });
});
