import type { HeartbeatReading, HeartbeatValue } from './heartbeat.js';

/**
 * What a well-behaved kit writes, as limits. Anyone holding the shared Redis URL can write a
 * heartbeat key, so a reading counts as evidence only inside these bounds; anything else is "no evidence"
 * (as if the key were absent), never "alive forever": a value with no TTL, an unreadable value, a TTL or
 * interval no kit sets, a beat from the future.
 */
export const HEARTBEAT_BOUNDS = {
  /** The kit's and the functions' largest beat interval (HEARTBEAT_INTERVAL_MS). */
  maxBeatEveryMs: 60_000,
  /** The largest TTL a kit sets (HEARTBEAT_TTL_MS); also how far ahead an index member may expire. */
  maxTtlMs: 600_000,
  /** How far ahead of the reader's clock a writer's `beatAt` may be (clock skew), for values without a TTL of their own. */
  maxClockSkewMs: 60_000,
  /**
   * The largest value a reader takes from one heartbeat key (a kit's is about 300 bytes): a longer one is
   * not read at all — Redis answers its length, not its bytes — and is no evidence.
   */
  maxValueBytes: 4_096,
  /** What one read of a whole app's heartbeats may bring back (values and IDs): more is a flooded index, no evidence. */
  maxReadBytes: 4 * 1024 * 1024,
} as const;

export type BeatEvidence =
  | { kind: 'none'; why: string }
  /** A beat inside the bounds; `ageMs` on Redis's clock when the writer said its TTL, else on the reader's. */
  | { kind: 'beat'; value: HeartbeatValue; ageMs: number; staleAfterMs: number; fresh: boolean };

/**
 * Judges one reading with the reader's own clock and thresholds. `intervalMs` is assumed when the value
 * does not carry its own interval (older kits). Nothing the writer says widens the bounds.
 */
export function beatEvidence(r: HeartbeatReading | undefined, nowMs: number, intervalMs: number): BeatEvidence {
  if (!r) return { kind: 'none', why: 'no key' };
  const v = r.value;
  if (!v) return { kind: 'none', why: 'unreadable value' };
  if (r.ttlMs === undefined) return { kind: 'none', why: 'no TTL' };
  if (r.ttlMs > HEARTBEAT_BOUNDS.maxTtlMs) return { kind: 'none', why: `TTL ${r.ttlMs} ms beyond ${HEARTBEAT_BOUNDS.maxTtlMs}` };
  if (v.beatEveryMs !== undefined && v.beatEveryMs > HEARTBEAT_BOUNDS.maxBeatEveryMs)
    return { kind: 'none', why: `beatEveryMs ${v.beatEveryMs} beyond ${HEARTBEAT_BOUNDS.maxBeatEveryMs}` };
  if (v.ttlMs !== undefined && v.ttlMs > HEARTBEAT_BOUNDS.maxTtlMs)
    return { kind: 'none', why: `declared ttlMs ${v.ttlMs} beyond ${HEARTBEAT_BOUNDS.maxTtlMs}` };
  let ageMs: number;
  if (v.ttlMs !== undefined) {
    // More TTL left than the writer set: not what the kit's one SET PX writes.
    if (r.ttlMs > v.ttlMs) return { kind: 'none', why: 'remaining TTL longer than the declared one' };
    ageMs = v.ttlMs - r.ttlMs;
  } else {
    const at = Date.parse(v.beatAt);
    if (!Number.isFinite(at)) return { kind: 'none', why: 'unreadable beatAt' };
    if (at > nowMs + HEARTBEAT_BOUNDS.maxClockSkewMs) return { kind: 'none', why: 'beatAt in the future' };
    ageMs = Math.max(0, nowMs - at);
  }
  const staleAfterMs = 2 * Math.min(v.beatEveryMs ?? intervalMs, HEARTBEAT_BOUNDS.maxBeatEveryMs);
  return { kind: 'beat', value: v, ageMs, staleAfterMs, fresh: ageMs < staleAfterMs };
}
