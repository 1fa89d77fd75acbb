import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEATH_REASONS, DeathNotice, deathNotice } from '../../packages/executor/src/contract/deathNotice.js';
import { Fence } from '../../packages/executor/src/contract/fenceCheck.js';
import { REQUEUED_MAX_QUEUES, REQUEUED_NUDGE_TARGETS, RequeuedNotice } from '../../packages/executor/src/contract/requeued.js';
import { HeartbeatValue, parseHeartbeat } from '../../packages/executor/src/contract/heartbeat.js';
import { ContractParseError, ISO_DATETIME } from '../../packages/executor/src/contract/parse.js';
import { contractSchema } from '../../shared/contractSchema.js';
import { pgText } from '../../packages/executor/src/text.js';

/**
 * Issue 28: the contract's parsers are hand-written (the kit ships without zod). They must accept and refuse
 * exactly what the zod schemas they replaced did: those schemas are written out here, as they were in the
 * contract, and generated input goes through both.
 */
const zPgText = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((s) => !s.includes('\u0000'), 'must not contain a NUL character');
const ZodDeathNotice = z.object({
  type: z.literal('executor.dead'),
  version: z.literal(1),
  executorId: zPgText(512),
  applicationName: zPgText(512),
  applicationVersions: z.array(zPgText(512)).max(1_000).optional(),
  reason: z.enum(DEATH_REASONS),
  detectedAt: z.iso.datetime({ offset: true }),
  detectedBy: zPgText(512),
  force: z.boolean().optional(),
  evidence: z.enum(['liveness', 'heartbeat', 'sessions']).optional(),
  staleBeatAt: z.iso.datetime({ offset: true }).optional(),
  incarnation: zPgText(64).optional(),
});
const ZodHeartbeat = z.object({
  executorId: z.string(),
  applicationName: z.string(),
  applicationVersion: z.string(),
  state: z.enum(['alive', 'draining', 'drained']),
  startedAt: z.string(),
  beatAt: z.string(),
  inFlight: z.number().int().nonnegative(),
  beatEveryMs: z.number().int().positive().optional(),
  ttlMs: z.number().int().positive().optional(),
});
const ZodFence = z.object({
  verdict: z.enum(['dead', 'moved', 'superseded']),
  reason: z.string().nullish(),
  detectedBy: z.string().nullish(),
  incarnation: z.string().nullish(),
  at: z.string().nullish(),
  moved: z.number().int().nullish(),
});
const ZodRequeued = z.object({
  applicationName: z.string().min(1),
  applicationVersion: z.string().nullish(),
  queues: z.array(z.string().min(1)).max(REQUEUED_MAX_QUEUES),
  to: z.array(z.string().min(1)).max(REQUEUED_NUDGE_TARGETS),
});

const valid = deathNotice({ executorId: 'e1', applicationName: 'shop', reason: 'sigterm', detectedBy: 'kit' });
/** Strings near every rule: empty, NUL, long, dates good and bad. */
const edgyString = fc.oneof(
  fc.constantFrom('', '\u0000', 'a\u0000b', 'x'.repeat(64), 'x'.repeat(65), 'x'.repeat(512), 'x'.repeat(513), 'ok'),
  fc.constantFrom('2026-12-04T10:00:00Z', '2026-12-04T10:00Z', '2026-02-29T00:00:00Z', '2024-02-29T23:59:59.123+05:30', '2026-12-04'),
  fc.constantFrom(
    '2026-13-01T00:00:00Z',
    '2026-12-04T24:00:00Z',
    '2026-12-04T10:00:00+2400',
    '2026-12-04t10:00:00z',
    ' 2026-12-04T10:00:00Z',
  ),
  fc.string(),
);
const edgyValue = fc.oneof(
  edgyString,
  fc.constantFrom(null, undefined, true, false, 0, -1, 1, 1.5, Number.NaN, 2 ** 53, {}, []),
  fc.constantFrom(...DEATH_REASONS, 'liveness', 'heartbeat', 'sessions', 'alive', 'draining', 'drained', 'dead', 'moved', 'superseded'),
  fc.array(edgyString, { maxLength: 3 }),
);

function mutated(base: Record<string, unknown>, keys: string[]) {
  return fc.tuple(fc.subarray(keys), fc.array(edgyValue, { minLength: keys.length, maxLength: keys.length })).map(([picked, values]) => {
    const out: Record<string, unknown> = { ...base, extra: 'ignored' };
    picked.forEach((k, i) => {
      if (values[i] === undefined) delete out[k];
      else out[k] = values[i];
    });
    return out;
  });
}

describe('contract parsers (issue 28: the kit without zod)', () => {
  it('the death notice accepts and refuses what the zod schema did, and returns the same value', () => {
    const keys = [...Object.keys(ZodDeathNotice.shape)];
    const base = {
      ...valid,
      applicationVersions: ['v1'],
      force: false,
      evidence: 'liveness',
      staleBeatAt: valid.detectedAt,
      incarnation: 'i1',
    };
    fc.assert(
      fc.property(mutated(base, keys), (input) => {
        const ours = DeathNotice.safeParse(input);
        const theirs = ZodDeathNotice.safeParse(input);
        expect(ours.success).toBe(theirs.success);
        if (ours.success && theirs.success) expect(ours.data).toStrictEqual(theirs.data);
        if (!ours.success && !theirs.success)
          expect(new Set(ours.error.issues.map((i) => i.path.join('.')))).toEqual(
            new Set(theirs.error.issues.map((i) => i.path.join('.'))),
          );
      }),
      { numRuns: 2_000 },
    );
  });

  it('the heartbeat value and the fence answer too', () => {
    const hb = {
      executorId: 'e',
      applicationName: 'a',
      applicationVersion: 'v',
      state: 'alive',
      startedAt: 's',
      beatAt: 'b',
      inFlight: 0,
      beatEveryMs: 250,
      ttlMs: 15_000,
    };
    fc.assert(
      fc.property(mutated(hb, Object.keys(hb)), (input) => {
        const ours = HeartbeatValue.safeParse(input);
        expect(ours.success).toBe(ZodHeartbeat.safeParse(input).success);
        if (ours.success) expect(ours.data).toStrictEqual(ZodHeartbeat.parse(input));
      }),
      { numRuns: 1_000 },
    );
    const fence = { verdict: 'dead', reason: 'r', detectedBy: 'reaper', incarnation: 'i', at: 't', moved: 3 };
    fc.assert(
      fc.property(mutated(fence, Object.keys(fence)), (input) => {
        const ours = Fence.safeParse(input);
        expect(ours.success).toBe(ZodFence.safeParse(input).success);
        if (ours.success) expect(ours.data).toStrictEqual(ZodFence.parse(input));
      }),
      { numRuns: 1_000 },
    );
    const requeued = { applicationName: 'shop', applicationVersion: 'v1', queues: ['_dbos_internal_queue', 'orders'], to: ['e1', 'e2'] };
    fc.assert(
      fc.property(mutated(requeued, Object.keys(requeued)), (input) => {
        const ours = RequeuedNotice.safeParse(input);
        expect(ours.success).toBe(ZodRequeued.safeParse(input).success);
        if (ours.success) expect(ours.data).toStrictEqual(ZodRequeued.parse(input));
      }),
      { numRuns: 1_000 },
    );
  });

  it('refuses non-objects, and parse throws every issue with its path', () => {
    for (const v of [null, undefined, 'x', 1, [], [valid]]) expect(DeathNotice.safeParse(v).success).toBe(false);
    let thrown: unknown;
    try {
      DeathNotice.parse({ ...valid, executorId: 'a\u0000', reason: 'bored', applicationVersions: ['ok', ''] });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ContractParseError);
    const issues = (thrown as ContractParseError).issues;
    expect(issues.map((i) => i.path.join('.'))).toEqual(['executorId', 'applicationVersions.1', 'reason']);
    expect(issues[0]?.message).toBe('must not contain a NUL character');
    expect((thrown as Error).message).toMatch(/^executorId: must not contain a NUL character; applicationVersions\.1: Too small/);
    // A beat that is not JSON or not the shape reads as unreadable, never as an error.
    expect(parseHeartbeat('{')).toBeUndefined();
    expect(parseHeartbeat('{"executorId":1}')).toBeUndefined();
  });

  it('ISO_DATETIME is zod 4’s offset datetime, leap days included', () => {
    const zodDatetime = z.iso.datetime({ offset: true });
    fc.assert(
      fc.property(
        fc.oneof(
          fc
            .date({ min: new Date(-62_000_000_000_000), max: new Date(250_000_000_000_000), noInvalidDate: true })
            .map((d) => d.toISOString()),
          edgyString,
        ),
        (s) => {
          expect(ISO_DATETIME.test(s)).toBe(zodDatetime.safeParse(s).success);
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('the plane wraps a contract parser in zod without redefining it (issues carried path for path)', () => {
    const schema = z.object({ source: contractSchema(pgText(5)).optional() }).strict();
    expect(schema.parse({ source: 'cloud' })).toEqual({ source: 'cloud' });
    expect(schema.parse({})).toEqual({});
    const r = schema.safeParse({ source: 'a\u0000' });
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([['source', 'must not contain a NUL character']]);
    expect(schema.safeParse({ source: 'toolong' }).success).toBe(false);
  });

  it('no second definition: the death notice, the heartbeat value and the fence answer are shaped only in the contract', () => {
    const ROOT = fileURLToPath(new URL('../../', import.meta.url));
    const sources = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
        const p = join(dir, e.name);
        if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : sources(p);
        return /\.c?ts$/.test(e.name) && !e.name.endsWith('.test.ts') ? [p] : [];
      });
    // A schema of one of the contract's shapes elsewhere: its name defined again, or its literals in a schema.
    const SECOND = [
      /\b(?:const|let|var|function|class)\s+(?:DeathNotice|HeartbeatValue|Fence)\b/,
      /(?:literal|oneOf|enum)\(\s*['"]executor\.dead['"]/,
      // exactly these states (the CLI's registry states are a superset, another thing)
      /(?:enum|oneOf)\(\s*\[\s*['"]alive['"],\s*['"]draining['"],\s*['"]drained['"]\s*\]/,
      /(?:enum|oneOf)\(\s*\[\s*['"]dead['"],\s*['"]moved['"],\s*['"]superseded['"]\s*\]/,
    ];
    const found = ['shared', 'functions', 'cli', 'scripts', 'packages/executor/src']
      .flatMap((d) => sources(join(ROOT, d)))
      .filter((f) => !/packages\/executor\/src\/contract\/(deathNotice|heartbeat|fenceCheck)\.ts$/.test(f))
      .flatMap((f) =>
        readFileSync(f, 'utf8')
          .split('\n')
          .flatMap((line, i) => (SECOND.some((re) => re.test(line)) ? [`${f.slice(ROOT.length)}:${i + 1}: ${line.trim()}`] : [])),
      );
    expect(found, 'a contract shape defined outside packages/executor/src/contract').toEqual([]);
  });
});
