import { pino, type LoggerOptions } from 'pino';
import {
  type CloudLoggingOptions,
  type ConsoleLoggerOptions,
  type Fields,
  LEVEL_NUMBER,
  type Logger,
  maskSecrets,
  nextInsertId,
  plainFields,
  serializeError,
  type Severity,
  timestampFragment,
} from '../../packages/executor/src/plane/index.js';

/**
 * The recovery plane's console logger: pino (docs/logging.md, "Why pino") writing the same Cloud Logging
 * lines as the kit's hand-written consoleLogger (packages/executor/src/log.ts), which must carry no pino into
 * an app. Same fields in the same order, the same insertId sequence, the same masking;
 * test/unit/cloudLogging.test.ts compares the two line for line, and both with Google's own configuration.
 */

/** pino's levels plus NOTICE at 35 between INFO and WARNING: Cloud Logging has it, pino not. */
const PINO_LEVEL_OF: Record<Severity, 'debug' | 'info' | 'notice' | 'warn' | 'error'> = {
  DEBUG: 'debug',
  INFO: 'info',
  NOTICE: 'notice',
  WARNING: 'warn',
  ERROR: 'error',
};
const SEVERITY_OF: Record<string, Severity | 'CRITICAL'> = {
  trace: 'DEBUG',
  debug: 'DEBUG',
  info: 'INFO',
  notice: 'NOTICE',
  warn: 'WARNING',
  error: 'ERROR',
  fatal: 'CRITICAL',
};

/** pino options that write what Cloud Logging reads, field for field as Google's published configuration does. */
export function cloudLoggingOptions(o: CloudLoggingOptions & { streamWrite?: (line: string) => string } = {}): LoggerOptions<'notice'> {
  const labels = o.labels && Object.keys(o.labels).length ? o.labels : undefined;
  return {
    level: 'info',
    customLevels: { notice: LEVEL_NUMBER.NOTICE },
    messageKey: 'message',
    // No pid/hostname on every line: Cloud Run's resource labels carry the instance.
    base: null,
    timestamp: timestampFragment,
    formatters: {
      level: (label, number) => ({ severity: SEVERITY_OF[label] ?? 'INFO', level: number }),
      log: (entry) => {
        const out: Record<string, unknown> = { ...entry };
        const err = entry.err;
        if (err instanceof Error && err.stack) {
          out.stack_trace = err.stack;
          if (o.serviceContext) out.serviceContext = o.serviceContext;
        }
        if (labels) out['logging.googleapis.com/labels'] = labels;
        out['logging.googleapis.com/insertId'] = nextInsertId();
        return out;
      },
    },
    ...(o.streamWrite ? { hooks: { streamWrite: o.streamWrite } } : {}),
  };
}

/** JSON lines on stdout for Cloud Logging, through pino, credentials masked on the serialised line. */
export function pinoConsoleLogger(base: Fields = {}, minimum: Severity = 'INFO', o: ConsoleLoggerOptions = {}): Logger {
  const { destination, ...cloud } = o;
  const root = pino(
    {
      ...cloudLoggingOptions({ ...cloud, streamWrite: (line) => maskSecrets(line, 'json') }),
      level: PINO_LEVEL_OF[minimum],
      serializers: { err: serializeError },
    },
    destination ? (destination as pino.DestinationStream) : pino.destination({ dest: 1, sync: true }),
  );
  // pino serialises a child's bindings once; a call that repeats one of their keys goes through the root
  // with the merged fields instead, so no key is printed twice.
  const over = (bindings: Fields): Logger => {
    const bound = root.child(bindings);
    const emit = (level: 'debug' | 'info' | 'notice' | 'warn' | 'error') => (message: string, fields?: Fields) => {
      if (!root.isLevelEnabled(level)) return;
      if (!fields) bound[level](message);
      else if (Object.keys(fields).some((k) => k in bindings)) root[level]({ ...bindings, ...plainFields(fields) }, message);
      else bound[level](plainFields(fields), message);
    };
    return {
      debug: emit('debug'),
      info: emit('info'),
      notice: emit('notice'),
      warn: emit('warn'),
      error: emit('error'),
      child: (fields) => over({ ...bindings, ...plainFields(fields) }),
    };
  };
  return over(plainFields(base));
}
