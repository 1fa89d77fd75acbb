import {
  beatEvidence,
  errorMessage,
  heartbeatKey,
  LogThrottle,
  parseHeartbeat,
  READ_HEARTBEATS_LUA,
  readLiveness,
  DEFAULT_KEY_PREFIX,
  redisKey,
} from '../../packages/executor/src/plane/index.js';
import { observeRedis, type RedisWitness } from '../db/queries/redisWitness.js';
import type { Beat } from './deathRule.js';
import type { ReaperDeps } from './types.js';

/**
 * The two witnesses, read once a tick for every candidate: heartbeats from Redis (one round trip) and
 * liveness locks from Postgres (one statement). A failure to read is never a reading of "dead".
 */
export interface Beats {
  beats: Map<string, Beat>;
  /** How long Redis has kept its keys: from its identity as kept in Postgres (shared/db/queries/redisWitness.ts). */
  keptKeysMs: number;
  /** How long Redis says it has been up (INFO server). */
  uptimeMs: number;
  /** Redis lost its keys since the last tick: restarted or failed over (another run_id), or flushed. */
  lostKeys: boolean;
  /**
   * Of a loss: what said so (for the WARNING); `first` is the first sighting of this Redis, nothing to warn
   * about; `young` a first sighting of a Redis that started after the kits it serves (a restart before this
   * plane first looked: their keys may be gone, though no run_id was seen to change).
   */
  change?: 'first' | 'young' | 'restarted' | 'flushed';
}

/**
 * The reaper's sentinel key: SET NX, no TTL, at every reading of the heartbeats (readBeats, in the same
 * round trip as the Redis identity it keeps in redis_witness). So it means "no flush since the plane last
 * read this Redis" (redis_witness.seen_at), not since its last tick: a plane with no candidate reads no
 * heartbeats and writes neither. Only its absence is read (a flush); its value is anyone's to write.
 */
export function sentinelKey(applicationName: string, prefix = DEFAULT_KEY_PREFIX): string {
  return redisKey(prefix, applicationName, 'reaper:sentinel');
}

/**
 * One round trip: the sentinel (SET NX: created means the keys were flushed), Redis's identity (INFO
 * server: run_id and uptime, which no client can write), and every candidate's key within the bounds a kit
 * writes (shared contract: at most maxValueBytes read per key). Then Redis's identity is kept in Postgres,
 * which decides how long Redis has kept its keys.
 */
export async function readBeats(
  deps: ReaperDeps,
  ids: string[],
  o: { kitsStartedAt?: number | undefined } = {},
): Promise<Beats | { skipped: string }> {
  if (!deps.redis) return { skipped: 'REDIS_URL is not set' };
  const prefix = deps.config.redis?.keyPrefix ?? DEFAULT_KEY_PREFIX;
  const sentinel = sentinelKey(deps.config.applicationName, prefix);
  const now = deps.clock();
  let replies: [Error | null, unknown][] | null;
  try {
    const keys = ids.map((id) => heartbeatKey(deps.config.applicationName, id, prefix));
    replies = await deps.redis
      .multi()
      .set(sentinel, new Date(now).toISOString(), 'NX')
      .info('server')
      .eval(READ_HEARTBEATS_LUA, keys.length, ...keys)
      .exec();
    if (!replies) throw new Error('transaction aborted');
    const failed = replies.find(([err]) => err);
    if (failed) throw failed[0] ?? new Error('failed');
  } catch (err) {
    return { skipped: `redis unreachable: ${errorMessage(err)}` };
  }
  const [[, created], [, info], [, read]] = replies as [[null, unknown], [null, string], [null, Array<string | number | null>]];
  const identity = redisIdentity(info);
  if (!identity) return { skipped: 'redis does not say its run_id and uptime (INFO server): whether it kept its keys is unknown' };
  let witness: RedisWitness;
  try {
    witness = await observeRedis(deps.db, deps.config.applicationName, { ...identity, flushed: created === 'OK' });
  } catch (err) {
    return {
      skipped: `redis's identity cannot be kept in Postgres (rerun infra/grants.sql?): ${errorMessage(err)}`,
    };
  }
  const beats = new Map<string, Beat>();
  ids.forEach((id, i) => beats.set(id, judgeRead(deps, read[2 * i], Number(read[2 * i + 1] ?? -2), now)));
  // A Redis first seen seconds after its start was most likely restarted under a running fleet (a reset to
  // say); one up for longer than a restart explains is just the first the reaper sees (nothing to say).
  // Unless every candidate's kit started after this Redis did (`kitsStartedAt`, the registry's): then each
  // key they ever wrote is in this Redis and nothing was lost — a fresh `npm start`, Redis and kits both
  // new. Unknown start times keep the cautious reading.
  const redisStartedAt = now - identity.uptimeMs;
  const keysPredateRedis = o.kitsStartedAt === undefined || o.kitsStartedAt < redisStartedAt;
  const change =
    witness.change === 'first' && identity.uptimeMs < restartWindowMs(deps.config.heartbeatTtlMs) && keysPredateRedis
      ? 'young'
      : witness.change;
  const lost = change === 'young' || change === 'restarted' || change === 'flushed';
  return { beats, keptKeysMs: witness.keptKeysMs, uptimeMs: identity.uptimeMs, lostKeys: lost, ...(change === 'none' ? {} : { change }) };
}

/** A Redis up for less than this when first seen was restarted: its keys were lost. */
function restartWindowMs(ttlMs: number): number {
  return Math.max(60_000, 2 * ttlMs);
}

/**
 * One key judged within what a kit writes (shared contract, heartbeatBounds.ts): anything else —
 * oversized, unreadable, no TTL, an interval or TTL no kit sets, a beat from the future — is no evidence,
 * as if the key were absent.
 */
function judgeRead(deps: ReaperDeps, v: string | number | null | undefined, pttl: number, now: number): Beat {
  if (typeof v !== 'string') return { present: false };
  const e = beatEvidence({ value: parseHeartbeat(v), ttlMs: pttl >= 0 ? pttl : undefined }, now, deps.config.heartbeatIntervalMs);
  if (e.kind === 'none') return { present: false };
  const at = Date.parse(e.value.beatAt);
  // Age on Redis's clock when the writer said its TTL (the TTL it set minus what is left of it).
  return { present: true, beatAt: Number.isFinite(at) ? at : undefined, beatEveryMs: e.value.beatEveryMs, ageMs: e.ageMs };
}

/** INFO server's run_id and uptime, or undefined when Redis does not say them. */
function redisIdentity(info: string): { runId: string; uptimeMs: number } | undefined {
  const runId = /^run_id:([0-9a-f]+)\r?$/m.exec(info)?.[1];
  const up = /^uptime_in_seconds:(\d+)\r?$/m.exec(info)?.[1];
  return runId && up !== undefined ? { runId, uptimeMs: Number(up) * 1000 } : undefined;
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
/**
 * Squatted on the previous reading, per application. A kit takes its lock and records its session in one
 * statement, but the lock shows in pg_locks the moment it is granted while the registry row commits a moment
 * later: a reading in between sees the kit's own fresh lock held by an unrecorded session. Read as free for
 * that one tick (the heartbeat keeps the kit alive), and reported only when a second reading agrees.
 */
const squattedBefore = new Map<string, Set<string>>();

export async function readLocks(deps: ReaperDeps, ids: string[]): Promise<LockEvidence> {
  const { config } = deps;
  if (config.reaper.livenessEvidence === 'none') return { held: new Set(), freeIsEvidence: false, reason: 'REAPER_LIVENESS_EVIDENCE=none' };
  if (ids.length === 0) return { held: new Set(), freeIsEvidence: true };
  const r = await readLiveness(deps.db, config.applicationName, ids);
  const before = squattedBefore.get(config.applicationName);
  squattedBefore.set(config.applicationName, r.squatted);
  for (const id of r.squatted) {
    if (!before?.has(id)) continue;
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
