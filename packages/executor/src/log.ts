import { writeSync } from 'node:fs';
import { cloudLine, type CloudLoggingOptions, fieldsJson, serializeError, type Severity } from './cloudLogging.js';

/**
 * The Logger every module takes through its deps: Cloud Logging's JSON lines on stdout (cloudLogging.ts) in
 * production, an in-memory sink in tests (`memoryLogger`). Callers log `(message, fields)`; the fields a
 * log-based metric counts on (`event`) are ordinary fields. The kit's `consoleLogger` is written by hand
 * (no pino in an app's tree); the plane's functions log the same lines through pino
 * (shared/log/pinoLogger.ts).
 */
export type { Severity } from './cloudLogging.js';
export type Fields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: Fields): void;
  info(message: string, fields?: Fields): void;
  notice(message: string, fields?: Fields): void;
  warn(message: string, fields?: Fields): void;
  error(message: string, fields?: Fields): void;
  child(fields: Fields): Logger;
}

export interface LogLine extends Fields {
  severity: Severity;
  message: string;
  time: string;
}

type Sink = (line: LogLine) => void;

const ORDER: Record<Severity, number> = { DEBUG: 0, INFO: 1, NOTICE: 2, WARNING: 3, ERROR: 4 };

/** A logger over any sink (tests, the CLI's stderr): the same Logger, lines as objects. */
export function makeLogger(sink: Sink, base: Fields = {}, minimum: Severity = 'DEBUG'): Logger {
  const emit =
    (severity: Severity) =>
    (message: string, fields: Fields = {}) => {
      if (ORDER[severity] < ORDER[minimum]) return;
      sink({ ...base, ...fields, severity, message, time: new Date().toISOString() });
    };
  return {
    debug: emit('DEBUG'),
    info: emit('INFO'),
    notice: emit('NOTICE'),
    warn: emit('WARNING'),
    error: emit('ERROR'),
    child: (fields) => makeLogger(sink, { ...base, ...fields }, minimum),
  };
}

export interface ConsoleLoggerOptions extends CloudLoggingOptions {
  /** Where lines go (stdout by default; a test's stream). Written synchronously, so a crash loses no line. */
  destination?: { write(line: string): unknown };
}

/**
 * JSON lines on stdout for Cloud Logging, written synchronously (a process that exits or crashes right
 * after loses no line). Credentials are masked on the serialised line (`maskSecrets`), once, so no call
 * site has to remember. A call's field that repeats a binding's key replaces it in place: no key is
 * printed twice.
 */
export function consoleLogger(base: Fields = {}, minimum: Severity = 'INFO', o: ConsoleLoggerOptions = {}): Logger {
  const { destination, ...cloud } = o;
  const write = destination ? (line: string) => void destination.write(line) : writeStdout;
  const over = (bindings: Fields): Logger => {
    // Serialised once per child, as pino does with its bindings.
    const bound = fieldsJson(bindings);
    const emit = (severity: Severity) => (message: string, fields?: Fields) => {
      if (ORDER[severity] < ORDER[minimum]) return;
      let json = bound;
      let err: unknown;
      if (fields) {
        const own = plainFields(fields);
        // A key the call repeats replaces the bound one in place (never printed twice); then, as pino
        // does, the merged fields count as the call's own, a bound `err` included.
        if (Object.keys(own).some((k) => k in bindings)) {
          const merged = { ...bindings, ...own };
          json = fieldsJson(merged);
          err = merged.err;
        } else {
          json += fieldsJson(own);
          err = own.err;
        }
      }
      write(maskSecrets(cloudLine(severity, message, json, cloud, err), 'json'));
    };
    return {
      debug: emit('DEBUG'),
      info: emit('INFO'),
      notice: emit('NOTICE'),
      warn: emit('WARNING'),
      error: emit('ERROR'),
      child: (fields) => over({ ...bindings, ...plainFields(fields) }),
    };
  };
  return over(plainFields(base));
}

/**
 * All of a line to fd 1, synchronously. A pipe may be non-blocking and full (EAGAIN): wait a millisecond and
 * go on, as pino's sonic-boom does, rather than drop the line or throw into the caller.
 */
function writeStdout(line: string): void {
  let buf = Buffer.from(line);
  for (let tries = 0; buf.length > 0;) {
    try {
      buf = buf.subarray(writeSync(1, buf));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || ++tries > 1_000) return;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }
}

/** Errors anywhere at the top level are written as {name, message, code}; `err` keeps its stack for Error Reporting. */
export function plainFields(fields: Fields): Fields {
  let out: Fields | undefined;
  for (const [k, v] of Object.entries(fields)) {
    if (k !== 'err' && (v instanceof Error || typeof v === 'bigint')) {
      out ??= { ...fields };
      out[k] = v instanceof Error ? serializeError(v) : String(v);
    }
  }
  return out ?? fields;
}

/**
 * One JSON line of a sink logger (the CLI's stderr). Credentials inside URLs (a driver's error that quotes its connection string, a Redis URL
 * with AUTH) are masked here, once, so no call site has to remember.
 */
export function formatLogLine(line: LogLine): string {
  return maskSecrets(JSON.stringify(line, errorReplacer), 'json');
}

/**
 * The password of `scheme://user:password@host` runs to the last `@` before the host (greedy, within one JSON string or up to the first `/`), so a raw `@`, a quote
 * (JSON-escaped as `\"`) or a space inside it is still masked; it never crosses a `/` or an unescaped
 * quote, so masking stays inside the one string. Over-masking a line is harmless; leaking a password is not.
 */
const URL_PASSWORD = /([a-z][a-z0-9+.-]*:\/\/[^\s"/@:]*:)(?:\\.|[^"\\/]){1,512}@(?=[^\s"/@\\]*(?:[/:?#"\s\\]|$))/gi;
/** `?password=…`, `&password=…` and libpq's `password=…` keyword form. */
const PARAM_PASSWORD = /((?:^|[?&;\s"'])(?:password|passwd|pwd|sslpassword)=)(?:\\.|[^&\s"'\\])+/gi;

/** The same for plain text (a terminal line), where a quote is an ordinary character of the password. */
const URL_PASSWORD_TEXT = /([a-z][a-z0-9+.-]*:\/\/[^\s"'/@:]*:)[^/\r\n]{1,512}@(?=[^\s"'/@]*(?:[/:?#"'\s]|$))/gi;

/** Masks credentials in text meant for a log, a terminal or an HTTP body (`json`: text that is JSON). */
export function maskSecrets(text: string, form: 'json' | 'text' = 'text'): string {
  return text.replace(form === 'json' ? URL_PASSWORD : URL_PASSWORD_TEXT, '$1***@').replace(PARAM_PASSWORD, '$1***');
}

export function silentLogger(): Logger {
  return makeLogger(() => {});
}

/** Keeps every line in memory; tests assert on what operators would see. */
export function memoryLogger(base: Fields = {}): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return Object.assign(
    makeLogger((l) => lines.push(l), base),
    { lines },
  );
}

/**
 * Cloud Logging's trace correlation fields for a request that carries a trace: the W3C `traceparent`
 * (Eventarc puts it on the CloudEvent; HTTP callers send the header) or Google's older
 * `X-Cloud-Trace-Context: TRACE/SPAN;o=1`. Cloud Logging only links a line to its trace when the value is
 * `projects/P/traces/T`, so without a project there is nothing useful to write. Malformed values are
 * ignored: a caller's header must never break or pollute logging.
 */
export function traceFields(project: string | undefined, carrier: { traceparent?: unknown; cloudTraceContext?: unknown }): Fields {
  if (!project) return {};
  let traceId: string | undefined;
  let spanId: string | undefined;
  let sampled: boolean | undefined;
  const tp =
    typeof carrier.traceparent === 'string'
      ? /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(carrier.traceparent.trim())
      : null;
  if (tp?.[1] && tp[2] && tp[3] && !/^0+$/.test(tp[1])) {
    traceId = tp[1];
    spanId = tp[2];
    sampled = (Number.parseInt(tp[3], 16) & 1) === 1;
  } else if (typeof carrier.cloudTraceContext === 'string') {
    const x = /^([0-9a-fA-F]{32})(?:\/(\d{1,20}))?(?:;o=([01]))?$/.exec(carrier.cloudTraceContext.trim());
    if (x?.[1] && !/^0+$/.test(x[1])) {
      traceId = x[1].toLowerCase();
      // Cloud Logging wants the span as 16 hex digits; X-Cloud-Trace-Context carries it in decimal.
      if (x[2]) spanId = BigInt(x[2]).toString(16).padStart(16, '0').slice(-16);
      if (x[3]) sampled = x[3] === '1';
    }
  }
  if (!traceId) return {};
  return {
    'logging.googleapis.com/trace': `projects/${project}/traces/${traceId}`,
    ...(spanId ? { 'logging.googleapis.com/spanId': spanId } : {}),
    ...(sampled !== undefined ? { 'logging.googleapis.com/trace_sampled': sampled } : {}),
  };
}

/** Trace fields of an HTTP request, from its `traceparent` or `X-Cloud-Trace-Context` header. */
export function httpTraceFields(project: string | undefined, headers: unknown): Fields {
  return traceFields(project, {
    traceparent: headerValue(headers, 'traceparent'),
    cloudTraceContext: headerValue(headers, 'x-cloud-trace-context'),
  });
}

function headerValue(headers: unknown, name: string): string | undefined {
  if (typeof headers !== 'object' || headers === null) return undefined;
  const v = (headers as Record<string, unknown>)[name.toLowerCase()];
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && typeof v[0] === 'string') return v[0];
  return undefined;
}

function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) {
    return { name: value.name, message: value.message, code: (value as { code?: unknown }).code };
  }
  if (typeof value === 'bigint') return value.toString();
  return value;
}
