import { describe, expect, it } from 'vitest';
import {
  REQUEUED_MAX_QUEUES,
  REQUEUED_PAYLOAD_MAX_BYTES,
  RequeuedNotice,
  requeuedPayload,
} from '../../packages/executor/src/contract/requeued.js';

/** The claim-now notice's payload stays under Postgres's NOTIFY bound whatever the names, and parses as the contract. */
describe('requeuedPayload', () => {
  const base = { applicationName: 'shop', applicationVersion: 'v1', to: ['a', 'b'] };
  const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

  it('short names: every queue named, no "more"', () => {
    const p = requeuedPayload({ ...base, queues: ['q1', 'q2'] });
    expect(p && RequeuedNotice.parse(JSON.parse(p))).toEqual({ ...base, queues: ['q1', 'q2'] });
  });

  for (const [label, char] of [
    ['ASCII', 'q'],
    ['2-byte', 'é'],
    ['3-byte', '€'],
    ['4-byte', '𝄞'],
  ] as const) {
    it(`20 queues of 424-character ${label} names: as many as fit, the rest counted`, () => {
      const queues = Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(424, char));
      const p = requeuedPayload({ ...base, queues });
      expect(p).toBeDefined();
      expect(bytes(p ?? '')).toBeLessThanOrEqual(REQUEUED_PAYLOAD_MAX_BYTES);
      const n = RequeuedNotice.parse(JSON.parse(p ?? ''));
      expect(n.queues).toEqual(queues.slice(0, n.queues.length));
      expect(n.queues.length + (n.more ?? 0)).toBe(20);
      expect(n.queues.length).toBeLessThan(20);
    });
  }

  it('more queues than the contract carries: the first REQUEUED_MAX_QUEUES named, the count of the rest in "more"', () => {
    const p = requeuedPayload({ ...base, queues: ['a', 'b'], queueCount: 50 });
    const n = RequeuedNotice.parse(JSON.parse(p ?? ''));
    expect(n).toMatchObject({ queues: ['a', 'b'], more: 48 });
    const many = requeuedPayload({ ...base, queues: Array.from({ length: 30 }, (_, i) => `q${i}`) });
    expect(RequeuedNotice.parse(JSON.parse(many ?? ''))).toMatchObject({ more: 10 });
    expect(JSON.parse(many ?? '').queues).toHaveLength(REQUEUED_MAX_QUEUES);
  });

  it('names too long for any notice: none (the caller reports it), never a payload over the bound', () => {
    expect(requeuedPayload({ ...base, applicationName: 'x'.repeat(8_000), queues: ['q'] })).toBeUndefined();
  });
});
