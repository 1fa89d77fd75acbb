import { describe, expect, it } from 'vitest';
import {
  boundFor,
  LOCK_BOUND_MS,
  MAX_BATCH,
  MIN_BATCH,
  nextBatchSize,
  OVER_BOUND_RETRIES,
  SHRINK_ABOVE_MS,
  TARGET_BATCH_MS,
} from '../../shared/retention/batchSize.js';
import { literal } from '../../shared/db/retentionSql.js';

/** The retention batch size and lock bound (shared/retention/batchSize.ts), and the literals its statement inlines. */
describe('retention batch size', () => {
  it('grows slowly below the target, holds between target and shrink point, halves above, quarters at the bound', () => {
    expect(nextBatchSize(100, TARGET_BATCH_MS - 1, false)).toBe(125);
    expect(nextBatchSize(1, 1, false)).toBe(2);
    expect(nextBatchSize(100, (TARGET_BATCH_MS + SHRINK_ABOVE_MS) / 2, false)).toBe(100);
    expect(nextBatchSize(100, SHRINK_ABOVE_MS + 1, false)).toBe(50);
    expect(nextBatchSize(100, LOCK_BOUND_MS, true)).toBe(25);
    expect(nextBatchSize(MIN_BATCH, LOCK_BOUND_MS, true)).toBe(MIN_BATCH);
    expect(nextBatchSize(MAX_BATCH, 1, false)).toBe(MAX_BATCH);
  });

  it('lifts the bound only for a lone workflow that hit it OVER_BOUND_RETRIES times in a row', () => {
    expect(boundFor(50, 10)).toBe(LOCK_BOUND_MS);
    expect(boundFor(MIN_BATCH, OVER_BOUND_RETRIES - 1)).toBe(LOCK_BOUND_MS);
    expect(boundFor(MIN_BATCH, OVER_BOUND_RETRIES)).toBeUndefined();
  });

  it('inlines values as SQL literals', () => {
    expect(literal(null)).toBe('NULL');
    expect(literal(undefined)).toBe('NULL');
    expect(literal(42)).toBe('42');
    expect(() => literal(1.5)).toThrow();
    expect(literal("it's")).toBe("'it''s'");
    // pg's escapeLiteral opens a backslash string with a space: ` E'…'`.
    expect(literal(['a', "b'c", 'd\\e'])).toBe(`ARRAY['a', 'b''c',  E'd\\\\e']::text[]`);
  });
});
