/**
 * Lua run atomically by Redis. KEYS[1] is the lock key, ARGV[1] the caller's random token.
 * @module
 */

/** Delete only if we still own it: a lock that expired and was re-taken by another worker is left alone. */
export const RELEASE = `
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0`;

/** Push the expiry (ARGV[2] ms) forward only if we still own it; 0 tells the caller the lock is lost. */
export const EXTEND = `
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`;
