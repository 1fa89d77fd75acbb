import type { Redis } from 'ioredis';
import {
  beatEvidence,
  type Db,
  type DeathNotice,
  heartbeatKey,
  type HeartbeatReading,
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
 *   false alarm, with the plane's thresholds).
 *
 * `doubt` is what the caller does when the heartbeat cannot prove death: the one intended difference.
 * - `'proceed'` (a notice): refused only on positive evidence of life, a beat inside the bounds a kit
 *   writes (packages/executor/src/contract/heartbeatBounds.ts) saying `alive`, and only while it is **fresh** (younger than two of
 *   its writer's intervals, the reaper's own staleness bound) when the kit's lock is what proves life: a
 *   SIGKILLed kit's last beat lives out its TTL (15 s) but stops being evidence half a second after the
 *   kill. For a kit that holds no lock (`livenessTracked` false) the heartbeat is the only
 *   witness, so a present key still counts until it expires. The notice is itself the sender's evidence,
 *   and a key anyone with the Redis URL can write must not hold a recovery off for ever: the
 *   caller redelivers such a notice rather than dropping it.
 * - `'refuse'` (an operator's terminal): only evidence of death goes ahead, Redis read and no key there or
 *   one saying `drained`. Redis unreadable (Memorystore is VPC-only, so a laptop often cannot see it), a
 *   draining beat (still finishing its work) or any other value is refused: recovering a live executor runs
 *   its steps twice, and the person at the terminal has `--force` when they know better.
 */
export interface AliveDeps {
  db: Db;
  /** Undefined when Redis is not configured (or, for the CLI, did not answer at start). */
  redis: Redis | undefined;
  keyPrefix?: string;
  heartbeatIntervalMs: number;
  clock: () => number;
}

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
  const beat = await readBeat(deps, q);
  const own = q.reason === 'sigterm' || q.reason === 'drained';
  const leaving = ['draining', 'drained', 'dead'].includes(q.registryState ?? '') || beat.state === 'draining' || beat.state === 'drained';
  if (!(own && leaving) && (await readLiveness(deps.db, q.applicationName, [q.executorId])).held.has(q.executorId)) {
    return { alive: true, witness: 'liveness-lock' };
  }
  if (q.reason === 'heartbeat-lapsed') return { alive: false };
  if (q.doubt === 'proceed') {
    if (beat.state !== 'alive' || (q.livenessTracked === true && !beat.fresh)) return { alive: false };
    return {
      alive: true,
      witness: 'heartbeat',
      state: beat.state,
      fresh: beat.fresh === true,
      ...(beat.ageMs === undefined ? {} : { ageMs: beat.ageMs }),
    };
  }
  if (!beat.readable) return { alive: 'unknown', witness: 'heartbeat' };
  const raw = beat.reading?.value?.state;
  return beat.reading && raw !== 'drained' ? { alive: true, witness: 'heartbeat', state: raw } : { alive: false };
}

/**
 * One read of the executor's key. `state` (with `fresh` and `ageMs`) is the beat's when it is evidence (inside the bounds); `reading`
 * the raw key, for the operator's stricter rule; `readable` false when Redis is absent or does not answer
 * (a failed read of an answering Redis counts as no key, as both callers always had it).
 */
async function readBeat(
  deps: AliveDeps,
  q: AliveQuestion,
): Promise<{ readable: boolean; reading?: HeartbeatReading; state?: string; fresh?: boolean; ageMs?: number }> {
  if (!deps.redis) return { readable: false };
  if (deps.redis.status !== 'ready') await waitReady(deps.redis, 500);
  if (deps.redis.status !== 'ready') return { readable: false };
  const reading = await readHeartbeat(deps.redis, heartbeatKey(q.applicationName, q.executorId, deps.keyPrefix)).catch(() => undefined);
  if (!reading) return { readable: true };
  const e = beatEvidence(reading, deps.clock(), deps.heartbeatIntervalMs);
  return { readable: true, reading, ...(e.kind === 'beat' ? { state: e.value.state, fresh: e.fresh, ageMs: e.ageMs } : {}) };
}
