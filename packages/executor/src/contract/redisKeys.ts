/**
 * Every Redis key afterlife writes or reads, kit and plane alike: `{prefix}:{applicationName}:{kind}` and,
 * for a key per executor, workflow or fork, `:{id}`. One builder, so two applications (or two planes with
 * their own REDIS_KEY_PREFIX) never share a key, and a key's shape is changed in one place.
 * @module
 */

/** REDIS_KEY_PREFIX's default. */
export const DEFAULT_KEY_PREFIX = 'afterlife';

/**
 * - `hb`: an executor's heartbeat (heartbeat.ts); `hbidx`: the index of heartbeats by expiry;
 * - `reaper:sentinel`: the reaper's flush witness (shared/reaper/evidence.ts);
 * - `recover`: the lock one executor's recovery holds (shared/recovery);
 * - `fork`: the lock on one workflow's repair (shared/repair).
 */
export type RedisKeyKind = 'hb' | 'hbidx' | 'reaper:sentinel' | 'recover' | 'fork';

export function redisKey(prefix: string | undefined, applicationName: string, kind: RedisKeyKind, id?: string): string {
  const base = `${prefix ?? DEFAULT_KEY_PREFIX}:${applicationName}:${kind}`;
  return id === undefined ? base : `${base}:${id}`;
}
