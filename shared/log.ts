/**
 * JSON lines with Cloud Logging's `severity`, so log-based metrics can match on fields.
 * The logger is passed through deps; tests capture lines with `memoryLogger`.
 */
export type Severity = 'DEBUG' | 'INFO' | 'NOTICE' | 'WARNING' | 'ERROR';
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

export function makeLogger(sink: Sink, base: Fields = {}, minimum: Severity = 'DEBUG'): Logger {
  const emit = (severity: Severity) => (message: string, fields: Fields = {}) => {
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

export function consoleLogger(base: Fields = {}, minimum: Severity = 'INFO'): Logger {
  return makeLogger((line) => process.stdout.write(`${JSON.stringify(line, errorReplacer)}\n`), base, minimum);
}

export function silentLogger(): Logger {
  return makeLogger(() => {});
}

/** Keeps every line in memory; tests assert on what operators would see. */
export function memoryLogger(base: Fields = {}): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return Object.assign(makeLogger((l) => lines.push(l), base), { lines });
}

function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) {
    return { name: value.name, message: value.message, code: (value as { code?: unknown }).code };
  }
  if (typeof value === 'bigint') return value.toString();
  return value;
}
