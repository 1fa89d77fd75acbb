import type { Redis } from 'ioredis';
import {
  beatEvidence,
  type Db,
  type DeathNotice,
  heartbeatKey,
  type HeartbeatReading,
  type HeartbeatValue,
  readHeartbeat,
  readLiveness,
  waitReady,
} from '../../packages/executor/src/plane/index.js';

/**
 * "Is this named executor alive?", asked before a recovery someone requested by name: a death notice to
 * executorDeath (verifyNotice.ts) and an operator's `afterlife-plane recover` (cli/commands/recover.ts). Both ask
 * it here so the rule has one home; each words the refusal for its own audience. (The reaper does not ask:
 * it judges deaths itself, shared/reaper/deathRule.ts.) Two witnesses, in order:
 *
 * - `force` (a notice's `"force": true`, the CLI's `--force`) skips the question: the caller is sure.
 * - A held liveness lock (Postgres's word: the process still has its session) is life, Redis or not,
 *   except for the executor's own `sigterm`/`drained` notice while the registry or its beat says it is
 *   leaving (it publishes while it still holds the lock, after recording that).
 * - The heartbeat, for every claim but `heartbeat-lapsed` (the recovery re-reads that one itself, as a
 *   false alarm, with the plane's thresholds), held to the caller's standard (`doubt`, `LifeStandard` below):
 *   `'proceed'` is a notice's (refused only on positive evidence of life, and such a refusal is
 *   redelivered, never dropped: a key anyone with the Redis URL can write must not hold a recovery off
 *   for ever), `'refuse'` an operator's (only evidence of death goes ahead).
 */
export interface AliveDeps extends BeatSource {
  db: Db;
}

/** Before a judgement, a Redis still connecting gets this long to answer. */
const WAIT_READY_MS = 500;

export interface AliveQuestion {
  applicationName: string;
  executorId: string;
  /** What the death claim says (a notice's reason; the CLI's is `manual`). */
  reason: DeathNotice['reason'];
  /** The registry's state of the executor, when the caller has read it. */
  registryState?: string | undefined;
  force: boolean;
  doubt: 'proceed' | 'refuse';
  /** The registry's word that the executor's kit holds a liveness lock: then only a fresh beat is life. */
  livenessTracked?: boolean;
}

export type Life =
  | { alive: false }
  | { alive: true; witness: 'liveness-lock' }
  | { alive: true; witness: 'heartbeat'; state: string | undefined; fresh?: boolean; ageMs?: number }
  /** Only under `doubt: 'refuse'`: Redis could not be read, so nothing says the executor is gone. */
  | { alive: 'unknown'; witness: 'heartbeat' };

export async function isAlive(deps: AliveDeps, q: AliveQuestion): Promise<Life> {
  if (q.force) return { alive: false };
  const beat = await readBeat(deps, q.applicationName, q.executorId, { waitReadyMs: WAIT_READY_MS });
  const own = q.reason === 'sigterm' || q.reason === 'drained';
  const beatLeaving = beat.kind === 'beating' && (beat.value.state === 'draining' || beat.value.state === 'drained');
  const leaving = ['draining', 'drained', 'dead'].includes(q.registryState ?? '') || beatLeaving;
  if (!(own && leaving) && (await readLiveness(deps.db, q.applicationName, [q.executorId])).held.has(q.executorId)) {
    return { alive: true, witness: 'liveness-lock' };
  }
  if (q.reason === 'heartbeat-lapsed') return { alive: false };
  const standard: LifeStandard = q.doubt === 'proceed' ? { of: 'notice', livenessTracked: q.livenessTracked === true } : { of: 'operator' };
  const life = showsLife(beat, standard);
  if (life === 'unknown') return { alive: 'unknown', witness: 'heartbeat' };
  if (!life) return { alive: false };
  if (q.doubt === 'proceed' && beat.kind === 'beating') {
    return { alive: true, witness: 'heartbeat', state: beat.value.state, fresh: beat.fresh, ageMs: beat.ageMs };
  }
  // The operator's standard counts a key outside the bounds too, so its answer is the state as written.
  return { alive: true, witness: 'heartbeat', state: beat.kind === 'unknown' ? undefined : beat.reading?.value?.state };
}

/**
 * "Does the heartbeat show life?" for a death someone asserted: a notice and an operator's recover (both
 * through isAlive above), and the recovery's own re-read of a death inferred from the heartbeat
 * (recoveryRun.ts). One read (`readBeat`), one judgement (`showsLife`); the reaper, which infers deaths
 * rather than hearing claims, reads the whole fleet at once (shared/reaper/evidence.ts).
 */
export interface BeatSource {
  /** Undefined when Redis is not configured (or, for the CLI, did not answer at start). */
  redis: Redis | undefined;
  keyPrefix?: string;
  /** The beat interval assumed for a value that does not carry its own (the plane's HEARTBEAT_INTERVAL_MS). */
  heartbeatIntervalMs: number;
  clock: () => number;
}

/** What one read of an executor's heartbeat key says, judged against the bounds a kit writes. */
export type Beat =
  /** A beat inside the bounds (packages/executor/src/contract/heartbeatBounds.ts), `fresh` while younger than two of its writer's intervals. */
  | { kind: 'beating'; reading: HeartbeatReading; value: HeartbeatValue; ageMs: number; fresh: boolean }
  /** No key (`reading` absent), or a key no kit writes (no TTL, unreadable, absurd, from the future). */
  | { kind: 'silent'; why: string; reading?: HeartbeatReading }
  /** Redis could not be asked, so the key says nothing either way. */
  | { kind: 'unknown'; reason: 'no-redis' | 'not-ready' | 'read-failed' };

/**
 * One read of the executor's key, on the reader's clock. `waitReadyMs` is how long a Redis still
 * connecting is waited for: once before a judgement, never between batches (a Redis that is down would
 * then cost every batch the wait).
 */
export async function readBeat(src: BeatSource, applicationName: string, executorId: string, o: { waitReadyMs: number }): Promise<Beat> {
  if (!src.redis) return { kind: 'unknown', reason: 'no-redis' };
  if (src.redis.status !== 'ready' && o.waitReadyMs > 0) await waitReady(src.redis, o.waitReadyMs);
  if (src.redis.status !== 'ready') return { kind: 'unknown', reason: 'not-ready' };
  let reading: HeartbeatReading | undefined;
  try {
    reading = await readHeartbeat(src.redis, heartbeatKey(applicationName, executorId, src.keyPrefix));
  } catch {
    return { kind: 'unknown', reason: 'read-failed' };
  }
  if (!reading) return { kind: 'silent', why: 'no key' };
  const e = beatEvidence(reading, src.clock(), src.heartbeatIntervalMs);
  if (e.kind === 'none') return { kind: 'silent', why: e.why, reading };
  return { kind: 'beating', reading, value: e.value, ageMs: e.ageMs, fresh: e.fresh };
}

/**
 * Whose standard of life a beat is held to: the only place the three askers differ.
 *
 * - `notice` (a death notice): the notice is the sender's evidence, so only positive evidence of life
 *   refuses it — a beat inside the bounds saying `alive`, and, when the kit's lock is the witness that
 *   failed (`livenessTracked`), only while it is fresh: a SIGKILLed kit's last beat lives out its TTL (15 s)
 *   but stops being evidence half a second after the kill. For a kit that holds no lock the key is the
 *   only witness, so a present one counts until it expires. Unknown is no evidence: the recovery's own
 *   re-read fails closed where the death rests on the heartbeat alone.
 * - `operator` (`afterlife-plane recover` at a terminal): only evidence of death goes ahead — Redis read
 *   and no key there, or one saying `drained`. Any other key (draining, even one outside the bounds) is
 *   life, and Redis unreadable (Memorystore is VPC-only, so a laptop often cannot see it) is unknown:
 *   recovering a live executor runs its steps twice, and the person at the terminal has `--force`.
 * - `recovery` (the re-read of a death inferred from the heartbeat, before it and at every batch): a beat
 *   inside the bounds is life when it is fresh, or newer than the stale beat the declaration saw
 *   (`staleBeatAt`; without one, any beat inside the bounds). The sender's `staleBeatAt` can only narrow
 *   a death (an old one makes more beats count), never widen it. No REDIS_URL means no heartbeats to read
 *   at all; a configured Redis that does not answer is unknown.
 */
export type LifeStandard =
  { of: 'notice'; livenessTracked: boolean } | { of: 'operator' } | { of: 'recovery'; staleBeatAt: string | undefined };

export function showsLife(beat: Beat, standard: LifeStandard): boolean | 'unknown' {
  switch (standard.of) {
    case 'notice':
      return beat.kind === 'beating' && beat.value.state === 'alive' && (beat.fresh || !standard.livenessTracked);
    case 'operator':
      if (beat.kind === 'unknown') return 'unknown';
      return beat.reading !== undefined && beat.reading.value?.state !== 'drained';
    case 'recovery':
      if (beat.kind === 'unknown') return beat.reason === 'no-redis' ? false : 'unknown';
      if (beat.kind === 'silent') return false;
      if (beat.fresh || standard.staleBeatAt === undefined) return true;
      return Date.parse(beat.value.beatAt) > Date.parse(standard.staleBeatAt);
  }
}
