/**
 * afterlife's JSON log lines made for a person: one line per event (time, function, level, message, the
 * few fields that matter), coloured where the terminal supports it; or the raw JSON lines, each carrying
 * `severity` and `event`, for scripts (`--json`, LOG_FORMAT=json). Used by `npm start`, `npm run demo` and
 * `afterlife-plane logs`. No dependency: pino-pretty prints every field of a line, and a reaper line has thirty.
 * @module
 */

import { inline } from './format.js';

export type LogFormat = 'pretty' | 'json';

/** LOG_FORMAT: `json`, `pretty`, or `auto` (the default: pretty on a terminal, JSON otherwise). */
export function logFormat(o: { json?: boolean; env?: Record<string, string | undefined>; isTTY?: boolean }): LogFormat {
  const raw = o.env?.LOG_FORMAT;
  if (raw !== undefined && raw !== '' && raw !== 'json' && raw !== 'pretty' && raw !== 'auto') {
    throw new Error(`LOG_FORMAT must be json, pretty or auto (got "${raw}")`);
  }
  if (o.json || raw === 'json') return 'json';
  if (raw === 'pretty') return 'pretty';
  return o.isTTY ? 'pretty' : 'json';
}

/** Colour on a terminal that has it, unless NO_COLOR says otherwise (FORCE_COLOR forces it). */
export function wantsColour(
  stream: { isTTY?: boolean; hasColors?: () => boolean },
  env: Record<string, string | undefined> = process.env,
): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0') return true;
  return stream.isTTY === true && (stream.hasColors?.() ?? false);
}

export type Entry = Record<string, unknown>;

/** A JSON object line, or undefined for anything else (a banner, a stack trace line). */
export function parseLine(raw: string): Entry | undefined {
  const t = raw.trim();
  if (!t.startsWith('{')) return undefined;
  try {
    const v: unknown = JSON.parse(t);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Entry) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One JSON line with `severity`, `event` and `function` whatever the source printed: a line that is not
 * JSON (functions-framework's banner) is wrapped as Cloud Run would (`event: "output"`), and a JSON line
 * that no log-based metric counts gets `event: "log"`.
 */
export function normalise(raw: string, source: string): Entry {
  const e = parseLine(raw);
  if (!e) return { severity: 'INFO', event: 'output', function: source, message: raw };
  return {
    ...e,
    severity: typeof e.severity === 'string' ? e.severity : 'INFO',
    event: typeof e.event === 'string' ? e.event : 'log',
    function: e.function ?? source,
  };
}

/** Follow one executor or one workflow: a line mentions it as a whole JSON string value (IDs, lists of IDs). */
export interface LogFilter {
  executor?: string | undefined;
  workflow?: string | undefined;
}

export function matches(e: Entry, f: LogFilter): boolean {
  if (!f.executor && !f.workflow) return true;
  const text = JSON.stringify(e);
  const has = (id: string) => text.includes(JSON.stringify(id));
  return (!f.executor || has(f.executor)) && (!f.workflow || has(f.workflow));
}

const SEVERITY_STYLE: Record<string, [string, string]> = {
  DEBUG: ['DEBUG', '90'],
  INFO: ['INFO ', '32'],
  NOTICE: ['NOTE ', '36'],
  WARNING: ['WARN ', '33'],
  ERROR: ['ERROR', '31'],
  CRITICAL: ['CRIT ', '35'],
};

/** The fields worth a glance, in this order; the rest stay in the JSON. */
const SHOWN = [
  'executorId',
  'workflowId',
  'reason',
  'reenqueued',
  'pending',
  'inFlight',
  'elapsedMs',
  'candidates',
  'alive',
  'gapMs',
  'outcome',
  'status',
  'code',
  'attempt',
  'retryInMs',
];

function clock(e: Entry): string {
  const ts = e.timestamp as { seconds?: unknown; nanos?: unknown } | undefined;
  let ms: number | undefined;
  if (ts && typeof ts.seconds === 'number') ms = ts.seconds * 1000 + Math.floor(Number(ts.nanos ?? 0) / 1e6);
  else if (typeof e.time === 'string') ms = Date.parse(e.time);
  else if (typeof e.time === 'number') ms = e.time;
  const d = new Date(ms !== undefined && Number.isFinite(ms) ? ms : Date.now());
  return d.toISOString().slice(11, 23);
}

// Every piece of a pretty line passes inline(): the values come from anyone who can name an application,
// register an executor or publish a notice, and JSON.stringify leaves C1 controls, U+2028 and bidi overrides raw.
function value(v: unknown): string {
  if (typeof v === 'string') return inline(/[\s"=]/.test(v) ? JSON.stringify(v) : v);
  if (Array.isArray(v)) return v.length <= 3 ? v.map(value).join(',') : `${v.slice(0, 3).map(value).join(',')},…(${v.length})`;
  return inline(JSON.stringify(v) ?? String(v));
}

/** `12:00:01.250 reaper     NOTE  executor declared dead event=executor_dead executorId=exec-A …` */
export function pretty(e: Entry, o: { colour: boolean; source?: string }): string {
  const paint = (code: string, s: string) => (o.colour ? `\u001b[${code}m${s}\u001b[0m` : s);
  const severity = typeof e.severity === 'string' ? e.severity : 'INFO';
  const [label, colour] = SEVERITY_STYLE[severity] ?? [inline(severity.slice(0, 5)).padEnd(5), '0'];
  const who = inline(String(e.function ?? o.source ?? e.fn ?? e.component ?? ''));
  const fields: string[] = [];
  if (typeof e.event === 'string' && e.event !== 'log' && e.event !== 'output') fields.push(`${paint('2', 'event=')}${inline(e.event)}`);
  for (const k of SHOWN) if (e[k] !== undefined && e[k] !== null) fields.push(`${paint('2', `${k}=`)}${value(e[k])}`);
  const err = e.err as { message?: unknown } | undefined;
  if (err && typeof err.message === 'string') fields.push(`${paint('2', 'err=')}${paint('31', inline(JSON.stringify(err.message)))}`);
  const message = inline(String(e.message ?? e.msg ?? ''));
  return [paint('2', clock(e)), paint('1', who.padEnd(13).slice(0, 13)), paint(colour, label), message, ...fields].join(' ');
}

/** One raw line in the chosen format, or undefined when the filter drops it. */
export function render(raw: string, source: string, o: { format: LogFormat; colour: boolean; filter?: LogFilter }): string | undefined {
  if (!raw.trim()) return undefined;
  const e = normalise(raw, source);
  if (o.filter && !matches(e, o.filter)) return undefined;
  return o.format === 'json' ? JSON.stringify(e) : pretty(e, { colour: o.colour, source });
}
