import { ConfigError } from '../errors.js';
import { HEARTBEAT_BOUNDS } from './heartbeatBounds.js';
import { KEY_PREFIX_RE } from './heartbeat.js';
import { DEFAULT_LIVENESS_LEASE_MS, MAX_LIVENESS_LEASE_MS, MIN_LIVENESS_LEASE_MS } from './lease.js';
import { PEM_CERTIFICATE_RE } from './redisTls.js';

/**
 * The settings both the kit (in the app) and the plane (the functions, the CLI) read, parsed here and only
 * here: one parser, one set of bounds, one message per refusal. A value one side accepted and the other
 * refused (or read differently) is how a live executor ran with a beat the reaper judged stale:
 * a heartbeat TTL past what the reaper counts as a kit's, an interval past what it reads as fresh. The
 * plane's zod schema and the kit's env reader both call `parseSetting`; test/unit/contractSettings.test.ts
 * walks every entry through both and checks the refusals are the same text.
 *
 * Without zod on purpose: the kit is installed into DBOS apps and must stay small (zod 4 alone is 8 MB).
 */

/** The largest delay a Node timer holds; a longer one fires after 1 ms (TimeoutOverflowWarning). */
export const MAX_TIMER_MS = 2_147_483_647;

/** Plain decimal, no sign, no leading zero: `1e3`, ` 300`, `0x3e8`, `+5`, `3.0` are typos, not numbers. */
const PLAIN_DECIMAL = /^(0|[1-9][0-9]{0,15})$/;
export const PLAIN_DECIMAL_MESSAGE = 'must be a plain decimal integer';

export type Parsed<T> = { ok: true; value: T } | { ok: false; problem: string };

export interface IntSetting {
  kind: 'int';
  min: number;
  max: number;
  default: number;
  /** Why the bounds are where they are, appended to the refusal. */
  belowMin?: string;
  aboveMax?: string;
  unit: 'ms' | '';
}

export interface TextSetting {
  kind: 'text';
  check: (v: string) => boolean;
  message: string;
}

export type Setting = IntSetting | TextSetting;

const IDENTIFIER_RE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const identifier: TextSetting = {
  kind: 'text',
  check: (v) => IDENTIFIER_RE.test(v),
  message: 'must be a SQL identifier (letters, digits, underscore; max 63)',
};
const nonEmpty: TextSetting = { kind: 'text', check: (v) => v.length > 0 && v.trim() === v, message: 'must be a non-empty name' };

function canParseUrl(v: string): boolean {
  try {
    new URL(v);
    return true;
  } catch {
    return false;
  }
}

export const SETTINGS = {
  DBOS_SYSTEM_SCHEMA: identifier,
  AFTERLIFE_SCHEMA: identifier,
  REDIS_URL: {
    kind: 'text',
    check: (v) => /^rediss?:\/\//.test(v) && canParseUrl(v),
    message: 'must be a redis:// or rediss:// URL',
  },
  REDIS_KEY_PREFIX: {
    kind: 'text',
    check: (v) => KEY_PREFIX_RE.test(v),
    message: 'must be 1-64 letters, digits, "_", "." or "-" (it is part of every Redis key)',
  },
  REDIS_CA_CERT: {
    kind: 'text',
    check: (v) => PEM_CERTIFICATE_RE.test(v),
    message: 'must hold PEM certificates (-----BEGIN CERTIFICATE-----)',
  },
  GOOGLE_CLOUD_PROJECT: nonEmpty,
  EXECUTOR_DEATH_TOPIC: nonEmpty,
  HEARTBEAT_TTL_MS: {
    kind: 'int',
    unit: 'ms',
    min: 500,
    max: HEARTBEAT_BOUNDS.maxTtlMs,
    default: 15_000,
    aboveMax: 'the reaper reads a longer TTL as not written by a kit',
  },
  HEARTBEAT_INTERVAL_MS: {
    kind: 'int',
    unit: 'ms',
    min: 50,
    max: HEARTBEAT_BOUNDS.maxBeatEveryMs,
    default: 250,
    aboveMax: 'the reaper reads a beat as stale after two of its own largest intervals',
  },
  AFTERLIFE_LIVENESS_LEASE_MS: {
    kind: 'int',
    unit: 'ms',
    min: MIN_LIVENESS_LEASE_MS,
    max: MAX_LIVENESS_LEASE_MS,
    default: DEFAULT_LIVENESS_LEASE_MS,
    belowMin: 'the lease is renewed once a second; a shorter lease ends live sessions',
    aboveMax: "longer leaves a lost host's work stranded for minutes",
  },
} as const satisfies Record<string, Setting>;

export type SettingName = keyof typeof SETTINGS;
export type SettingValue<K extends SettingName> = (typeof SETTINGS)[K] extends IntSetting ? number : string;
export const SETTING_NAMES = Object.keys(SETTINGS) as SettingName[];

function bound(s: IntSetting, n: number): string | undefined {
  const unit = s.unit ? ` ${s.unit}` : '';
  if (n < s.min) return `must be at least ${s.min}${unit}${s.belowMin ? ` (${s.belowMin})` : ''}`;
  if (n > s.max) return `must be at most ${s.max}${unit}${s.aboveMax ? ` (${s.aboveMax})` : ''}`;
  return undefined;
}

/** One setting's raw text (an env variable): the value, or the one message both sides refuse it with. */
export function parseSetting<K extends SettingName>(name: K, raw: string): Parsed<SettingValue<K>> {
  const s: Setting = SETTINGS[name];
  if (s.kind === 'text') return s.check(raw) ? { ok: true, value: raw as SettingValue<K> } : { ok: false, problem: s.message };
  if (!PLAIN_DECIMAL.test(raw)) return { ok: false, problem: PLAIN_DECIMAL_MESSAGE };
  const n = Number(raw);
  const problem = bound(s, n);
  return problem ? { ok: false, problem } : { ok: true, value: n as SettingValue<K> };
}

/** The same bounds for a value given as a programmatic option (a number, not text). */
export function checkSettingNumber(name: SettingName, value: number): string | undefined {
  const s: Setting = SETTINGS[name];
  if (s.kind !== 'int') return undefined;
  if (!Number.isSafeInteger(value)) return 'must be a whole number';
  return bound(s, value);
}

/** A duration only the kit reads (its own options): plain decimal, at least `min`, within a timer. */
export function parseDurationMs(raw: string, min: number): Parsed<number> {
  if (!PLAIN_DECIMAL.test(raw)) return { ok: false, problem: PLAIN_DECIMAL_MESSAGE };
  const problem = bound({ kind: 'int', unit: 'ms', min, max: MAX_TIMER_MS, default: min }, Number(raw));
  return problem ? { ok: false, problem } : { ok: true, value: Number(raw) };
}

/** The lease from a programmatic option, within the bounds AFTERLIFE_LIVENESS_LEASE_MS has. */
export function livenessLeaseMs(value: unknown, name = 'livenessLeaseMs'): number {
  if (value === undefined) return DEFAULT_LIVENESS_LEASE_MS;
  const leaseProblem = (n: number) => checkSettingNumber('AFTERLIFE_LIVENESS_LEASE_MS', n);
  const problem =
    typeof value === 'number'
      ? leaseProblem(value)
      : typeof value === 'string' && value !== ''
        ? leaseProblem(Number(value))
        : 'must be a number of milliseconds';
  if (problem) throw new ConfigError([`${name}: ${problem}`]);
  return Number(value);
}

/** The shared settings whose values must agree with one another, as one side resolved them (defaults applied). */
export interface RelatedSettings {
  HEARTBEAT_TTL_MS: number;
  HEARTBEAT_INTERVAL_MS: number;
}

/**
 * Relations between shared settings, judged here for both sides (the kit at attach, the plane's config):
 * each value inside its own bounds is not enough. The reaper counts a beat fresh for two intervals
 * (heartbeatBounds.ts), so the key must outlive that: a TTL shorter than two beats lets a live kit's key
 * expire between its beats, and a kit running without the liveness lock is then declared dead while it works.
 */
export function settingRelationProblems(v: RelatedSettings): string[] {
  const problems: string[] = [];
  const needs = 2 * v.HEARTBEAT_INTERVAL_MS;
  if (v.HEARTBEAT_TTL_MS < needs) {
    problems.push(
      `HEARTBEAT_TTL_MS: ${v.HEARTBEAT_TTL_MS} ms must be at least two beats (2 × HEARTBEAT_INTERVAL_MS = ${needs} ms): ` +
        `a shorter TTL lets a live kit's heartbeat expire between its beats; raise HEARTBEAT_TTL_MS or lower HEARTBEAT_INTERVAL_MS, alike on both sides`,
    );
  }
  return problems;
}
