import { randomBytes } from 'node:crypto';

/**
 * What Cloud Logging reads from a JSON line on stdout, field for field as Google's published pino
 * configuration writes it (`@google-cloud/pino-logging-gcp-config`, createGcpLoggingPinoConfig): `severity`
 * (and `level`, pino's number), `timestamp` as {seconds, nanos}, the line's fields, for an `err` with a stack
 * a `stack_trace` plus `serviceContext` (what Error Reporting groups on), the labels, a monotonic
 * `logging.googleapis.com/insertId` so lines of one millisecond keep their order, and `message` last.
 *
 * Written by hand: the kit runs inside the user's app and may add only a few packages to it, so it
 * carries no pino. The recovery plane logs through pino with the same layout (shared/log/pinoLogger.ts);
 * test/unit/cloudLogging.test.ts holds the two, and Google's own configuration, to the same lines.
 */

export type Severity = 'DEBUG' | 'INFO' | 'NOTICE' | 'WARNING' | 'ERROR';

/** pino's numeric levels (the `level` field), NOTICE at 35 between INFO and WARNING: Cloud Logging has it, pino not. */
export const LEVEL_NUMBER: Record<Severity, number> = { DEBUG: 20, INFO: 30, NOTICE: 35, WARNING: 40, ERROR: 50 };

export interface CloudLoggingOptions {
  /** Error Reporting's service (the Cloud Run service, K_SERVICE) and version (K_REVISION). */
  serviceContext?: { service: string; version?: string | undefined };
  /** Indexed labels on every line (`logging.googleapis.com/labels`): cheap to filter on in Logs Explorer. */
  labels?: Record<string, string>;
}

const INSERT_ID_PREFIX = randomBytes(6).toString('hex');
let insertSeq = 0;

/** The next insertId of this process: one sequence for every logger in it, the plane's pino one included. */
export function nextInsertId(): string {
  return `${INSERT_ID_PREFIX}-${String(++insertSeq).padStart(10, '0')}`;
}

/** Google's config writes the same {seconds, nanos} fragment: ~10x cheaper than an ISO string. */
export function timestampFragment(): string {
  const now = Date.now();
  const seconds = Math.floor(now / 1000);
  return `,"timestamp":{"seconds":${seconds},"nanos":${(now - seconds * 1000) * 1_000_000}}`;
}

/** An error as a log field: {name, message, code}; `err`'s stack goes to stack_trace instead. */
export function serializeError(value: unknown): unknown {
  if (!(value instanceof Error)) return value;
  return { name: value.name, message: value.message, code: (value as { code?: unknown }).code };
}

/**
 * One value as JSON, never throwing: a cycle is written "[Circular]" and a BigInt as its digits' string
 * (what a log line can hold); undefined when the value has no JSON form (a function), so the field is left out.
 */
function valueJson(value: unknown): string | undefined {
  switch (typeof value) {
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
    case 'number':
      return Number.isFinite(value) ? String(value) : 'null';
    case 'string':
      return JSON.stringify(value);
    case 'bigint':
      return JSON.stringify(value.toString());
    default:
      try {
        return JSON.stringify(value);
      } catch {
        return JSON.stringify(value, circularReplacer());
      }
  }
}

function circularReplacer(): (this: unknown, key: string, value: unknown) => unknown {
  const ancestors: unknown[] = [];
  return function (this: unknown, _key: string, value: unknown) {
    if (typeof value === 'bigint') return value.toString();
    if (typeof value !== 'object' || value === null) return value;
    // `this` is the object holding the key: pop until it is on top, so only ancestors remain.
    while (ancestors.length > 0 && ancestors[ancestors.length - 1] !== this) ancestors.pop();
    if (ancestors.includes(value)) return '[Circular]';
    ancestors.push(value);
    return value;
  };
}

/** Fields as the inside of a JSON object, each `,"key":value` (the form pino keeps a child's bindings in). */
export function fieldsJson(fields: Record<string, unknown>): string {
  let out = '';
  for (const key of Object.keys(fields)) {
    const json = valueJson(key === 'err' ? serializeError(fields[key]) : fields[key]);
    if (json !== undefined) out += `,${JSON.stringify(key)}:${json}`;
  }
  return out;
}

/**
 * One Cloud Logging JSON line (with its newline): `fields` is fieldsJson's output for the bindings and the
 * call's own fields; `err`, when an Error with a stack, gives the stack_trace and serviceContext Error
 * Reporting reads.
 */
export function cloudLine(severity: Severity, message: string, fields: string, o: CloudLoggingOptions = {}, err?: unknown): string {
  let line = `{"severity":"${severity}","level":${LEVEL_NUMBER[severity]}${timestampFragment()}${fields}`;
  if (err instanceof Error && err.stack) {
    line += `,"stack_trace":${JSON.stringify(err.stack)}`;
    if (o.serviceContext) line += `,"serviceContext":${JSON.stringify(o.serviceContext)}`;
  }
  if (o.labels && Object.keys(o.labels).length) line += `,"logging.googleapis.com/labels":${JSON.stringify(o.labels)}`;
  return `${line},"logging.googleapis.com/insertId":"${nextInsertId()}","message":${JSON.stringify(message)}}\n`;
}
