import { LogThrottle } from '../../packages/executor/src/executor/throttle.js';
import { beatEvidence, HEARTBEAT_BOUNDS } from '../../packages/executor/src/contract/heartbeatBounds.js';
import { parseHeartbeat, heartbeatKey } from '../../packages/executor/src/contract/heartbeat.js';
import { readLiveness } from '../../packages/executor/src/db/queries/liveness.js';
import type { Beat } from './deathRule.js';
import type { ReaperDeps } from './types.js';

/**
 * The two witnesses, read once a tick for every candidate: heartbeats from Redis (one round trip) and
 * liveness locks from Postgres (one statement). A failure to read is never a reading of "dead".
 */
export interface Beats {
  beats: Map<string, Beat>;
  /** How long Redis has kept its keys: the age of the reaper's sentinel (SET NX, no TTL). */
  keptKeysMs: number;
  /** The sentinel was missing: Redis was flushed or restarted since the last tick (or this is the first). */
  lostKeys: boolean;
  /**
   * Of a missing sentinel: this process never saw it and Redis has been up a while, so it is most likely
   * the first reaper tick with candidates for this app, not a flush or a restart (nothing to warn about).
   */
  firstSentinel?: boolean;
}

/** Sentinels this process has seen in Redis: one of them missing later is a flush or a restart. */
const seenSentinels = new Set<string>();

/** A Redis up for less than this when the sentinel is missing was restarted: its keys were lost. */
function restartWindowMs(ttlMs: number): number {
  return Math.max(60_000, 2 * ttlMs);
}

/** The reaper's sentinel key: SET NX, no TTL, so its age says how long Redis has kept its keys. */
export function sentinelKey(applicationName: string, prefix = 'afterlife'): string {
  return `${prefix}:${applicationName}:reaper:sentinel`;
}

export async function readBeats(deps: ReaperDeps, ids: string[]): Promise<Beats | { skipped: string }> {
  if (!deps.redis) return { skipped: 'REDIS_URL is not set' };
  const prefix = deps.config.redis?.keyPrefix ?? 'afterlife';
  const sentinel = sentinelKey(deps.config.applicationName, prefix);
  const now = deps.clock();
  try {
    const keys = ids.map((id) => heartbeatKey(deps.config.applicationName, id, prefix));
    const tx = deps.redis
      .multi()
      .set(sentinel, new Date(now).toISOString(), 'NX')
      .get(sentinel)
      .mget(...keys);
    for (const k of keys) tx.pttl(k);
    const replies = await tx.exec();
    if (!replies) throw new Error('transaction aborted');
    const failed = replies.find(([err]) => err);
    if (failed) throw failed[0];
    const [[, created], [, since], [, values]] = replies as [[null, unknown], [null, string | null], [null, Array<string | null>]];
    const pttls = replies.slice(3).map(([, v]) => Number(v));
    const beats = new Map<string, Beat>();
    ids.forEach((id, i) => {
      const raw = values[i];
      if (raw === null || raw === undefined) {
        beats.set(id, { present: false });
        return;
      }
      const pttl = pttls[i] ?? -1;
      // Judged within what a kit writes (packages/executor/src/contract/heartbeatBounds.ts): anything else — unreadable, no TTL,
      // an interval or TTL no kit sets, a beat from the future — is no evidence, as if the key were absent.
      const e = beatEvidence({ value: parseHeartbeat(raw), ttlMs: pttl >= 0 ? pttl : undefined }, now, deps.config.heartbeatIntervalMs);
      if (e.kind === 'none') {
        beats.set(id, { present: false });
        return;
      }
      const at = Date.parse(e.value.beatAt);
      // Age on Redis's clock when the writer said its TTL (the TTL it set minus what is left of it).
      beats.set(id, { present: true, beatAt: Number.isFinite(at) ? at : undefined, beatEveryMs: e.value.beatEveryMs, ageMs: e.ageMs });
    });
    let sinceMs = since ? Date.parse(since) : NaN;
    let missing = created === 'OK';
    if (!missing && !(sinceMs <= now + HEARTBEAT_BOUNDS.maxClockSkewMs)) {
      // Unreadable or from the future: not a sentinel this reaper wrote (anyone with the Redis URL can SET
      // it). Trusting it would make every absence "not yet evidence" forever; it is replaced, and Redis's
      // keeping of keys counts from now, as after a flush.
      await deps.redis.set(sentinel, new Date(now).toISOString());
      sinceMs = now;
      missing = true;
    }
    // A sentinel this process never saw: a restart shows in Redis's uptime; otherwise it is the first
    // (a flush while no reaper ran cannot be told apart: the absence streaks restart anyway, unannounced).
    const firstSentinel =
      missing && !seenSentinels.has(sentinel) && (await redisUptimeMs(deps)) >= restartWindowMs(deps.config.heartbeatTtlMs);
    seenSentinels.add(sentinel);
    return { beats, keptKeysMs: Number.isFinite(sinceMs) ? Math.max(0, now - sinceMs) : 0, lostKeys: missing, firstSentinel };
  } catch (err) {
    return { skipped: `redis unreachable: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/** Redis's uptime (INFO server), or 0 when it cannot be read (then a missing sentinel counts as lost). */
async function redisUptimeMs(deps: ReaperDeps): Promise<number> {
  try {
    const info = (await deps.redis?.info('server')) ?? '';
    const s = /^uptime_in_seconds:(\d+)/m.exec(info)?.[1];
    return s === undefined ? 0 : Number(s) * 1000;
  } catch {
    return 0;
  }
}

/** Which candidates hold their liveness lock, and whether a free one is evidence this tick (and if not, why). */
export interface LockEvidence {
  held: Set<string>;
  /** Locks held by something other than the kit's registered session: read as free, reported. */
  squatted?: Set<string>;
  freeIsEvidence: boolean;
  reason?: string;
}

const squatReports = new LogThrottle(60_000);

export async function readLocks(deps: ReaperDeps, ids: string[]): Promise<LockEvidence> {
  const { config } = deps;
  if (config.reaper.livenessEvidence === 'none') return { held: new Set(), freeIsEvidence: false, reason: 'REAPER_LIVENESS_EVIDENCE=none' };
  if (ids.length === 0) return { held: new Set(), freeIsEvidence: true };
  const r = await readLiveness(deps.db, config.applicationName, ids);
  for (const id of r.squatted) {
    // Once a minute per executor: a reaper ticks four times a second.
    if (squatReports.pass(id).log) {
      deps.logger.warn(
        "a liveness lock is held by a session that is not the executor kit's: read as free (a squatter, a colliding client, or a stale session of an earlier process)",
        {
          executorId: id,
          event: 'liveness_lock_squatted',
        },
      );
    }
  }
  if (r.upMs < config.reaper.livenessSettleMs) {
    // A held lock still proves life; a free one may only be a kit that has not reconnected yet.
    return {
      held: r.held,
      freeIsEvidence: false,
      reason: `postgres started ${Math.round(r.upMs / 100) / 10} s ago: the kits are re-taking their locks`,
    };
  }
  return { held: r.held, freeIsEvidence: true };
}
