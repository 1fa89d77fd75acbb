import type { Redis } from 'ioredis';
import { HEARTBEAT_BOUNDS } from './heartbeatBounds.js';
import { type Infer, integer, object, oneOf, optional, string } from './parse.js';
import { DEFAULT_KEY_PREFIX, redisKey } from './redisKeys.js';

/**
 * The heartbeat contract (docs/design.md#heartbeat): key `afterlife:{app}:hb:{executorId}`, a JSON value, a PX TTL.
 * Written by the executor kit, read by executor-death (false-alarm check), the reaper and the drain function.
 *
 * Beside the keys, a per-application index: the sorted set `afterlife:{app}:hbidx` of executor IDs scored
 * by when their key expires (Redis's clock), written in the same script as the key, and a marker
 * `afterlife:{app}:hbidx:on` (no TTL) saying the app's kits maintain it. Readers that want every heartbeat
 * of an app read the index instead of SCANning a keyspace the app may share (a SCAN cost 136 ms with 100k
 * unrelated keys, 409 ms with 300k). The key stays the evidence: a member whose key is gone
 * reads as absent, and members past their expiry are pruned on every write and read.
 */
export const HeartbeatValue = object({
  executorId: string(),
  applicationName: string(),
  applicationVersion: string(),
  state: oneOf(['alive', 'draining', 'drained']),
  startedAt: string(),
  beatAt: string(),
  inFlight: integer({ min: 0 }),
  /** The writer's beat interval: the reaper reads a beat as stale after two of them (older kits omit it). */
  beatEveryMs: optional(integer({ min: 1 })),
  /** The PX TTL the writer set: with the key's remaining PTTL it gives the beat's age on Redis's clock. */
  ttlMs: optional(integer({ min: 1 })),
});
export type HeartbeatValue = Infer<typeof HeartbeatValue>;

/**
 * The Redis key prefix (REDIS_KEY_PREFIX, parsed in settings.ts): no `:` (two apps' keys could overlap), no
 * glob characters (SCAN patterns), no whitespace or control characters.
 */
export const KEY_PREFIX_RE = /^[A-Za-z0-9_.-]{1,64}$/;

export function heartbeatKey(applicationName: string, executorId: string, prefix = DEFAULT_KEY_PREFIX): string {
  return redisKey(prefix, applicationName, 'hb', executorId);
}

export function heartbeatPattern(applicationName: string, prefix = DEFAULT_KEY_PREFIX): string {
  // The prefix is escaped too: config validates it, but a caller's own prefix must not widen the scan.
  return redisKey(escapeGlob(prefix), escapeGlob(applicationName), 'hb', '*');
}

export function heartbeatIndexKey(applicationName: string, prefix = DEFAULT_KEY_PREFIX): string {
  return redisKey(prefix, applicationName, 'hbidx');
}

export function indexMarkerKey(applicationName: string, prefix: string): string {
  return `${heartbeatIndexKey(applicationName, prefix)}:on`;
}

// Redis's own clock scores the index, so executors' clocks never decide which member is stale.
const NOW_MS_LUA = `local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/**
 * A member may expire at most this far ahead (a kit's largest TTL): one scored further out was not written
 * by a kit (anyone with the Redis URL can ZADD), and is pruned with the expired ones.
 */
const MAX_AHEAD_MS = HEARTBEAT_BOUNDS.maxTtlMs;
/** More live members than any fleet has: the index is flooded, and its reading is no evidence. */
export const MAX_INDEX_MEMBERS = 10_000;

const PRUNE_LUA = `redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '(' .. (now + ${MAX_AHEAD_MS}), '+inf')`;

/**
 * KEYS: heartbeat key, index, marker. ARGV: value, TTL ms, executor ID. Exported for the golden vectors
 * (contract/vectors.json): every kit, in any language, writes a beat with exactly this script.
 */
export const WRITE_HEARTBEAT_LUA = `${NOW_MS_LUA}
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
${PRUNE_LUA}
redis.call('SET', KEYS[3], '1')
return 1`;

/**
 * One key's value only when it is a string of at most `maxValueBytes` (STRLEN first, so an oversized value
 * never leaves Redis): the value, or -1 for one too long or of another type, or false when absent:
 * anyone with the Redis URL can write 16 KB (or 512 MB) into a key a reader GETs.
 */
const BOUNDED_GET_LUA = `local function boundedGet(k)
  local n = redis.pcall('STRLEN', k)
  if type(n) ~= 'number' or n > ${HEARTBEAT_BOUNDS.maxValueBytes} then return -1 end
  if n == 0 then return redis.call('EXISTS', k) == 1 and '' or false end
  return redis.call('GET', k)
end`;

/**
 * KEYS: marker, index. ARGV: the heartbeat key prefix. Returns false when no kit of the app maintains an
 * index yet, else [id, value, id, value, …] of the live members (value as BOUNDED_GET_LUA says), at most
 * `maxReadBytes` in all: past it the index is flooded, an error (no evidence).
 */
const MEMBERS_LUA = `if redis.call('EXISTS', KEYS[1]) == 0 then return false end
${NOW_MS_LUA}
${PRUNE_LUA}
${BOUNDED_GET_LUA}
if redis.call('ZCARD', KEYS[2]) > ${MAX_INDEX_MEMBERS} then return redis.error_reply('heartbeat index flooded: more than ${MAX_INDEX_MEMBERS} live members') end
local out, total = {}, 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local v = boundedGet(ARGV[1] .. id)
  if v then
    total = total + #id + (type(v) == 'string' and #v or 0)
    if total > ${HEARTBEAT_BOUNDS.maxReadBytes} then return redis.error_reply('heartbeat index flooded: more than ${HEARTBEAT_BOUNDS.maxReadBytes} bytes') end
    out[#out + 1] = id
    out[#out + 1] = v
  end
end
return out`;

/** KEYS: heartbeat keys. Returns [value, pttl, …] per key, each value as BOUNDED_GET_LUA says (the reaper's read too). */
export const READ_HEARTBEATS_LUA = `${BOUNDED_GET_LUA}
local out = {}
for i, k in ipairs(KEYS) do
  out[2 * i - 1] = boundedGet(k)
  out[2 * i] = redis.call('PTTL', k)
end
return out`;

/** One key as read within the bounds: absent, too long or not a string (`oversized`), or its raw value. */
export type BoundedRaw = { raw: string | null; oversized: boolean; pttlMs: number };

/** Reads heartbeat keys in one round trip, none of them longer than `maxValueBytes` (see BOUNDED_GET_LUA). */
export async function readHeartbeatKeys(redis: Redis, keys: string[]): Promise<BoundedRaw[]> {
  if (keys.length === 0) return [];
  const r = (await redis.eval(READ_HEARTBEATS_LUA, keys.length, ...keys)) as Array<string | number | null>;
  return keys.map((_, i) => {
    const v = r[2 * i];
    return { raw: typeof v === 'string' ? v : null, oversized: v === -1, pttlMs: Number(r[2 * i + 1] ?? -2) };
  });
}

/**
 * Writes one heartbeat: the key with its TTL and its index entry, atomically (one script), so a reader of
 * the index never misses a key that exists. Non-cluster Redis (Memorystore for Redis): the three keys may
 * live in different hash slots.
 */
export async function writeHeartbeat(redis: Redis, value: HeartbeatValue, ttlMs: number, prefix = DEFAULT_KEY_PREFIX): Promise<void> {
  const app = value.applicationName;
  await redis.eval(
    WRITE_HEARTBEAT_LUA,
    3,
    heartbeatKey(app, value.executorId, prefix),
    heartbeatIndexKey(app, prefix),
    indexMarkerKey(app, prefix),
    JSON.stringify(value),
    ttlMs,
    value.executorId,
  );
}

/** Removes one heartbeat and its index entry (the kit's last act after a hand-over). */
export async function deleteHeartbeat(
  redis: Redis,
  applicationName: string,
  executorId: string,
  prefix = DEFAULT_KEY_PREFIX,
): Promise<void> {
  const replies = await redis
    .multi()
    .del(heartbeatKey(applicationName, executorId, prefix))
    .zrem(heartbeatIndexKey(applicationName, prefix), executorId)
    .exec();
  const failed = replies?.find(([err]) => err);
  if (!replies || failed) throw failed?.[0] ?? new Error('heartbeat delete: transaction aborted');
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

/** Reads one heartbeat (at most `maxValueBytes`: a longer one reads as unreadable). A key with an unreadable value still proves the executor is alive. */
export async function readHeartbeat(redis: Redis, key: string): Promise<HeartbeatReading | undefined> {
  const [k] = await readHeartbeatKeys(redis, [key]);
  if (!k || (k.raw === null && !k.oversized)) return undefined;
  return { value: k.raw === null ? undefined : parseHeartbeat(k.raw), ttlMs: k.pttlMs >= 0 ? k.pttlMs : undefined };
}

/**
 * All heartbeats of an app, by executor ID: the index's members and their keys in one script, bounded in
 * bytes (HEARTBEAT_BOUNDS.maxValueBytes a value, maxReadBytes in all). Before any
 * kit of the app has written the index (kits older than the index), it falls back to SCAN, never KEYS:
 * Memorystore is shared. A fleet mixing old and new kits is read through the index once a new kit beat,
 * so upgrade the kits before relying on it (README).
 */
export async function readAllHeartbeats(
  redis: Redis,
  applicationName: string,
  prefix = DEFAULT_KEY_PREFIX,
): Promise<Map<string, HeartbeatValue | undefined>> {
  const pairs = (await redis.eval(
    MEMBERS_LUA,
    2,
    indexMarkerKey(applicationName, prefix),
    heartbeatIndexKey(applicationName, prefix),
    heartbeatKey(applicationName, '', prefix),
  )) as Array<string | number> | null;
  if (pairs === null) return scanHeartbeats(redis, applicationName, prefix);
  // A member whose key expired or was deleted is absent (the script leaves it out); an oversized one unreadable.
  const out = new Map<string, HeartbeatValue | undefined>();
  for (let i = 0; i + 1 < pairs.length; i += 2) {
    const v = pairs[i + 1];
    out.set(String(pairs[i]), typeof v === 'string' ? parseHeartbeat(v) : undefined);
  }
  return out;
}

async function scanHeartbeats(redis: Redis, applicationName: string, prefix: string): Promise<Map<string, HeartbeatValue | undefined>> {
  const out = new Map<string, HeartbeatValue | undefined>();
  const keyPrefix = redisKey(prefix, applicationName, 'hb', '');
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', heartbeatPattern(applicationName, prefix), 'COUNT', 500);
    cursor = next;
    if (keys.length === 0) continue;
    const values = await readHeartbeatKeys(redis, keys);
    keys.forEach((k, i) => {
      const v = values[i];
      if (!v || (v.raw === null && !v.oversized)) return; // expired between SCAN and the read
      out.set(k.slice(keyPrefix.length), v.raw === null ? undefined : parseHeartbeat(v.raw));
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
  prefix = DEFAULT_KEY_PREFIX,
): Promise<{ versions: Set<string>; unreadable: string[] }> {
  const versions = new Set<string>();
  const unreadable: string[] = [];
  for (const [executorId, v] of await readAllHeartbeats(redis, applicationName, prefix)) {
    if (v === undefined) unreadable.push(executorId);
    else if (v.state === 'alive') versions.add(v.applicationVersion);
  }
  return { versions, unreadable };
}
