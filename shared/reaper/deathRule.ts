/**
 * The death rule for executors with the kit (docs/design.md#invariant-3-death-only-on-strong-evidence), as a pure function of one tick's
 * evidence; the streak across ticks ("seen on two observations") is kept in executor_observations.
 *
 *   liveness lock held                      → alive, whatever Redis says (frozen, starved and wedged
 *                                             processes keep their session; wedged is the stuck pass's)
 *   lock free, heartbeat stale              → suspect `liveness`: dead on the second such observation
 *   lock free, heartbeat fresh              → alive (the kit is re-taking its lock after a blip)
 *   lock evidence unavailable, key absent   → suspect `heartbeat`: dead when absent on two observations
 *                                             at least two beat intervals apart
 *   lock evidence unavailable, key present  → alive
 *   heartbeat unknown (Redis unreachable)   → no judgement: every doubt means alive
 *
 * "Stale" is a beat older than two beat intervals (the writer's own, carried in the value; the age read on
 * Redis's clock), or no key at all. An absent key is evidence only once Redis has kept its keys for a TTL: right after a flush or a
 * restart, a missing key means the kit has not rewritten it yet, not that it stopped. The lock evidence is
 * unavailable when the executor's kit does not hold one (registered without it), when the operator turned
 * it off (a transaction-mode pooler), or right after Postgres started (every session just dropped).
 * @module
 */

/**
 * One heartbeat as read: absent, or present with its age. `ageMs` is measured on Redis's clock (the TTL the
 * writer set minus the key's remaining PTTL), so no two hosts' clocks are compared; `beatAt` (the writer's
 * clock) is the fallback for kits that do not say their TTL.
 */
export type Beat =
  { present: false } | { present: true; beatAt: number | undefined; beatEveryMs: number | undefined; ageMs?: number | undefined };

export interface KitEvidence {
  /** `unavailable`: this executor's lock says nothing this tick. */
  lock: 'held' | 'free' | 'unavailable';
  /** undefined: Redis could not say this tick. */
  beat: Beat | undefined;
}

export interface RuleSettings {
  nowMs: number;
  /** The beat interval assumed when the value does not carry its own. */
  intervalMs: number;
  ttlMs: number;
  /** How long Redis has kept its keys (the reaper's sentinel's age); undefined when unknown. */
  redisKeptKeysMs: number | undefined;
}

export type Judgement = 'alive' | 'suspect-liveness' | 'suspect-heartbeat' | 'unknown';

export function staleAfterMs(beat: Beat, intervalMs: number): number {
  return 2 * (beat.present && beat.beatEveryMs ? beat.beatEveryMs : intervalMs);
}

export function isStale(beat: Beat, s: RuleSettings): boolean {
  if (!beat.present) return absenceMeans(s);
  const age = beat.ageMs ?? (beat.beatAt === undefined ? undefined : s.nowMs - beat.beatAt);
  // A value we cannot read still came from a live writer.
  if (age === undefined) return false;
  return age >= staleAfterMs(beat, s.intervalMs);
}

/** Whether a missing key is evidence of silence: Redis has kept its keys for at least a TTL. */
export function absenceMeans(s: RuleSettings): boolean {
  return s.redisKeptKeysMs !== undefined && s.redisKeptKeysMs >= s.ttlMs;
}

export function judgeKit(e: KitEvidence, s: RuleSettings): Judgement {
  if (e.lock === 'held') return 'alive';
  if (e.beat === undefined) return 'unknown';
  if (e.lock === 'free') {
    if (!e.beat.present && !absenceMeans(s)) return 'unknown';
    return isStale(e.beat, s) ? 'suspect-liveness' : 'alive';
  }
  if (e.beat.present) return 'alive';
  return absenceMeans(s) ? 'suspect-heartbeat' : 'unknown';
}

/** The streak that turns a suspect into a death: two observations; for the heartbeat alone, 2 intervals apart. */
export function streakIsDeath(
  kind: 'liveness' | 'heartbeat',
  streak: { absentTicks: number; absentMs: number },
  intervalMs: number,
): boolean {
  if (streak.absentTicks < 2) return false;
  return kind === 'liveness' || streak.absentMs >= 2 * intervalMs;
}
