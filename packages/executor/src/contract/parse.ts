/**
 * The contract's validation, hand-written: zod is 8.4 MB installed, more than the rest of the kit's
 * dependencies together, and the kit only needs to check a few small JSON shapes (the death notice, the
 * heartbeat value, the fence answer). These parsers behave as the zod schemas they replace did: unknown
 * fields are dropped, a missing or wrong field is refused with an issue naming its path, and `safeParse`
 * answers in zod's shape ({ success, data } or { success, error: { issues } }), so the plane, which keeps zod
 * at its own boundaries, takes a contract parser wherever it took a schema. test/unit/contractParse.test.ts
 * walks them.
 * @module
 */

export interface Issue {
  path: PropertyKey[];
  message: string;
}

/** What `parse` throws: every issue of the input at once, each `path: message`. */
export class ContractParseError extends Error {
  constructor(readonly issues: Issue[]) {
    super(issues.map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`).join('; '));
    this.name = 'ContractParseError';
  }
}

export type ParseResult<T> = { success: true; data: T } | { success: false; error: ContractParseError };

export interface Parser<T> {
  /** The value, or the issues: never throws. */
  safeParse(input: unknown): ParseResult<T>;
  /** The value; throws ContractParseError listing every issue. */
  parse(input: unknown): T;
}

/** A field that may be absent (`optional`) or absent or null (`nullish`): an optional key of its object. */
type Absent<T> = Parser<T> & { readonly absent: 'optional' | 'nullish' };

export type Infer<P> = P extends Parser<infer T> ? T : never;

type Check<T> = (input: unknown, path: PropertyKey[], issues: Issue[]) => T | undefined;

function parser<T>(check: Check<T>): Parser<T> & { check: Check<T> } {
  const safeParse = (input: unknown): ParseResult<T> => {
    const issues: Issue[] = [];
    const data = check(input, [], issues);
    return issues.length ? { success: false, error: new ContractParseError(issues) } : { success: true, data: data as T };
  };
  return {
    check,
    safeParse,
    parse: (input) => {
      const r = safeParse(input);
      if (!r.success) throw r.error;
      return r.data;
    },
  };
}

const checkOf = <T>(p: Parser<T>): Check<T> => (p as unknown as { check: Check<T> }).check;

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number' && Number.isNaN(v)) return 'NaN';
  return typeof v;
}

function expected(what: string, v: unknown, path: PropertyKey[], issues: Issue[]): undefined {
  issues.push({ path: [...path], message: `Invalid input: expected ${what}, received ${typeName(v)}` });
  return undefined;
}

export interface StringRules {
  min?: number;
  max?: number;
  pattern?: RegExp;
  /** The message when `pattern` does not match. */
  patternMessage?: string;
  refine?: { test: (s: string) => boolean; message: string };
}

/** A string within its rules (lengths in UTF-16 code units, as zod and `String.length` count). */
export function string(rules: StringRules = {}): Parser<string> {
  return parser((v, path, issues) => {
    if (typeof v !== 'string') return expected('string', v, path, issues);
    const before = issues.length;
    if (rules.min !== undefined && v.length < rules.min)
      issues.push({ path: [...path], message: `Too small: expected string to have >=${rules.min} characters` });
    if (rules.max !== undefined && v.length > rules.max)
      issues.push({ path: [...path], message: `Too big: expected string to have <=${rules.max} characters` });
    if (rules.pattern && !rules.pattern.test(v))
      issues.push({ path: [...path], message: rules.patternMessage ?? `Invalid string: must match pattern ${String(rules.pattern)}` });
    if (rules.refine && !rules.refine.test(v)) issues.push({ path: [...path], message: rules.refine.message });
    return issues.length === before ? v : undefined;
  });
}

/** An integer (a safe one), at least `min` when given. */
export function integer(rules: { min?: number } = {}): Parser<number> {
  return parser((v, path, issues) => {
    if (typeof v !== 'number' || Number.isNaN(v)) return expected('number', v, path, issues);
    if (!Number.isSafeInteger(v)) return expected('int', v, path, issues);
    if (rules.min !== undefined && v < rules.min) {
      issues.push({ path: [...path], message: `Too small: expected number to be >=${rules.min}` });
      return undefined;
    }
    return v;
  });
}

export function boolean(): Parser<boolean> {
  return parser((v, path, issues) => (typeof v === 'boolean' ? v : expected('boolean', v, path, issues)));
}

export function literal<const L extends string | number>(value: L): Parser<L> {
  return parser((v, path, issues) => {
    if (v === value) return value;
    issues.push({ path: [...path], message: `Invalid input: expected ${JSON.stringify(value)}` });
    return undefined;
  });
}

export function oneOf<const V extends readonly string[]>(values: V): Parser<V[number]> {
  return parser((v, path, issues) => {
    if (typeof v === 'string' && values.includes(v)) return v as V[number];
    issues.push({ path: [...path], message: `Invalid option: expected one of ${values.map((x) => JSON.stringify(x)).join('|')}` });
    return undefined;
  });
}

/** An array of at most `max` items, each checked. */
export function array<T>(item: Parser<T>, rules: { max?: number } = {}): Parser<T[]> {
  const each = checkOf(item);
  return parser((v, path, issues) => {
    if (!Array.isArray(v)) return expected('array', v, path, issues);
    if (rules.max !== undefined && v.length > rules.max) {
      issues.push({ path: [...path], message: `Too big: expected array to have <=${rules.max} items` });
      return undefined;
    }
    const before = issues.length;
    const out = v.map((x, i) => each(x, [...path, i], issues) as T);
    return issues.length === before ? out : undefined;
  });
}

/** The field may be absent (or `undefined`). */
export function optional<T>(p: Parser<T>): Absent<T | undefined> {
  const inner = checkOf(p);
  return { ...parser<T | undefined>((v, path, issues) => (v === undefined ? undefined : inner(v, path, issues))), absent: 'optional' };
}

/** The field may be absent, `undefined` or `null`. */
export function nullish<T>(p: Parser<T>): Absent<T | null | undefined> {
  const inner = checkOf(p);
  return {
    ...parser<T | null | undefined>((v, path, issues) => (v === undefined || v === null ? v : inner(v, path, issues))),
    absent: 'nullish',
  };
}

type Shape = Record<string, Parser<unknown>>;
type OptionalKeys<S extends Shape> = { [K in keyof S]: S[K] extends { readonly absent: string } ? K : never }[keyof S];
type Flat<T> = { [K in keyof T]: T[K] } & {};
export type ObjectOf<S extends Shape> = Flat<
  { [K in Exclude<keyof S, OptionalKeys<S>>]: Infer<S[K]> } & { [K in OptionalKeys<S>]?: Infer<S[K]> }
>;

/**
 * A plain JSON object with these fields, in this order; unknown fields are dropped, as zod's `object` does.
 * An optional field that is absent stays absent in the result.
 */
export function object<S extends Shape>(shape: S): Parser<ObjectOf<S>> {
  const fields = Object.entries(shape).map(([k, p]) => [k, checkOf(p)] as const);
  return parser((v, path, issues) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return expected('object', v, path, issues);
    const before = issues.length;
    const out: Record<string, unknown> = {};
    for (const [k, check] of fields) {
      const raw = Object.prototype.hasOwnProperty.call(v, k) ? (v as Record<string, unknown>)[k] : undefined;
      const value = check(raw, [...path, k], issues);
      if (value !== undefined || raw !== undefined) out[k] = value;
    }
    return issues.length === before ? (out as ObjectOf<S>) : undefined;
  });
}

/**
 * RFC 3339 date-time with `Z` or a numeric offset, seconds required, fraction optional; the date a real one
 * (leap days included). The same expression as zod 4's `z.iso.datetime({ offset: true })`, which the death
 * notice used.
 */
export const ISO_DATETIME =
  /^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|([+-](?:[01]\d|2[0-3]):[0-5]\d)))$/;

export function isoDatetime(): Parser<string> {
  return string({ pattern: ISO_DATETIME, patternMessage: 'Invalid ISO datetime' });
}
