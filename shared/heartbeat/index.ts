import type { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * The heartbeat contract (DESIGN.md): key `afterlife:{app}:hb:{executorId}`, a JSON value, a PX TTL.
 * Written by the executor kit, read by executor-death (false-alarm check), the reaper and the drain function.
 */
export const HeartbeatValue = z.object({
  executorId: z.string(),
  applicationName: z.string(),
  applicationVersion: z.string(),
  state: z.enum(['alive', 'draining', 'drained']),
  startedAt: z.string(),
  beatAt: z.string(),
  inFlight: z.number().int().nonnegative(),
  /** The writer's beat interval: the reaper reads a beat as stale after two of them (older kits omit it). */
  beatEveryMs: z.number().int().positive().optional(),
  /** The PX TTL the writer set: with the key's remaining PTTL it gives the beat's age on Redis's clock. */
  ttlMs: z.number().int().positive().optional(),
});
export type HeartbeatValue = z.infer<typeof HeartbeatValue>;

export function heartbeatKey(applicationName: string, executorId: string, prefix = 'afterlife'): string {
  return `${prefix}:${applicationName}:hb:${executorId}`;
}

export function heartbeatPattern(applicationName: string, prefix = 'afterlife'): string {
  // The prefix is escaped too: config validates it, but a caller's own prefix must not widen the scan.
  return `${escapeGlob(prefix)}:${escapeGlob(applicationName)}:hb:*`;
}

function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

export interface HeartbeatReading {
  value: HeartbeatValue | undefined;
  /** Remaining TTL in ms, when the key exists. */
  ttlMs: number | undefined;
}

/** A value we cannot read still came from a live writer, so callers treat the key's presence as the signal. */
export function parseHeartbeat(raw: string): HeartbeatValue | undefined {
  try {
    const parsed = HeartbeatValue.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Reads one heartbeat. A key with an unreadable value still proves the executor is alive. */
export async function readHeartbeat(redis: Redis, key: string): Promise<HeartbeatReading | undefined> {
  const [[, raw], [, ttl]] = (await redis.multi().get(key).pttl(key).exec()) as [[unknown, string | null], [unknown, number]];
  if (raw === null) return undefined;
  return { value: parseHeartbeat(raw), ttlMs: ttl >= 0 ? ttl : undefined };
}

/** All heartbeats of an app, by executor ID. SCAN, never KEYS: Memorystore is shared. */
export async function readAllHeartbeats(redis: Redis, applicationName: string, prefix = 'afterlife'): Promise<Map<string, HeartbeatValue | undefined>> {
  const out = new Map<string, HeartbeatValue | undefined>();
  const keyPrefix = `${prefix}:${applicationName}:hb:`;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', heartbeatPattern(applicationName, prefix), 'COUNT', 500);
    cursor = next;
    if (keys.length === 0) continue;
    const values = await redis.mget(...keys);
    keys.forEach((k, i) => {
      const raw = values[i];
      if (raw == null) return; // expired between SCAN and MGET
      out.set(k.slice(keyPrefix.length), parseHeartbeat(raw));
    });
  } while (cursor !== '0');
  return out;
}

/**
 * Versions run by executors whose heartbeat says `alive` (draining ones no longer claim work), and the
 * executors whose value could not be read (a live writer whose version is unknown). Throws when Redis does.
 */
export async function readLiveVersions(
  redis: Redis,
  applicationName: string,
  prefix = 'afterlife',
): Promise<{ versions: Set<string>; unreadable: string[] }> {
  const versions = new Set<string>();
  const unreadable: string[] = [];
  for (const [executorId, v] of await readAllHeartbeats(redis, applicationName, prefix)) {
    if (v === undefined) unreadable.push(executorId);
    else if (v.state === 'alive') versions.add(v.applicationVersion);
  }
  return { versions, unreadable };
}
