import { guardedApplications } from '../db/doctor/planes.js';
import { readRedisWitness } from '../db/doctor/redisWitness.js';
import { sentinelKey } from '../reaper/evidence.js';
import { fail, pass, warn, type Check } from './types.js';

/**
 * Redis reachable, and not reset since the plane last read it: Redis's own identity (run_id) against the one
 * the plane recorded at that reading (redis_witness), its uptime against the time since that reading,
 * and the reaper's sentinel key (SET NX at the same reading, no TTL). Another run_id, a Redis up for less
 * time than since that reading, or the sentinel gone means it restarted or its keys were flushed, and every
 * heartbeat absence proves nothing until the plane reads it again (shared/reaper/evidence.ts). A plane reads
 * Redis only when it has executors to judge: with no reading yet (a fresh stack, no kits) there is nothing to
 * compare with, and a sentinel never written is no flush.
 */
export const redisCheck: Check = {
  id: 'redis',
  title: 'Redis reachable and not reset since the plane last read it',
  async run({ redis, config, db }) {
    if (!config.redis)
      return warn(
        "REDIS_URL is not set: no heartbeats, deaths are found on the liveness lock and the reaper's slower evidence",
        'set REDIS_URL on the plane and the kits (docs/configuration.md)',
      );
    if (!redis)
      return fail(
        'Redis does not answer',
        'check REDIS_URL, the network path (VPC egress) and REDIS_CA_CERT; the plane runs degraded meanwhile',
      );
    await redis.ping();
    const app = config.applicationName;
    const plane = (await guardedApplications(db)).find((g) => g.applicationName === app);
    if (!plane || plane.sinceTickMs === null) return pass('Redis answers (no plane tick yet to compare with)');
    const witness = await readRedisWitness(db, app);
    if (!witness) return pass('Redis answers (the plane has not read it yet: no executor to judge, nothing to compare with)');
    const [sentinel, info] = await Promise.all([redis.get(sentinelKey(app, config.redis.keyPrefix)), redis.info('server')]);
    const uptimeS = Number(/^uptime_in_seconds:(\d+)/m.exec(info)?.[1] ?? NaN);
    const runId = /^run_id:(\w+)/m.exec(info)?.[1];
    const sinceMs = witness.sinceMs;
    const since = `the plane last read it ${Math.round(sinceMs / 1000)} s ago`;
    const fix =
      "if it was a flush, find who flushed (the keys are afterlife's evidence); if a restart or failover, expect it in Memorystore's maintenance log. The plane's next reading starts counting absences afresh";
    if (runId && witness.runId !== runId)
      return fail(
        `Redis is another server (run_id ${runId}) than the one the plane last read (${witness.runId}): it lost every heartbeat and lock`,
        fix,
      );
    if (Number.isFinite(uptimeS) && uptimeS * 1000 < sinceMs)
      return fail(`Redis restarted ${uptimeS} s ago, after ${since}: it lost every heartbeat and lock`, fix);
    if (sentinel === null) return fail(`the plane's sentinel key is gone from Redis since ${since}: its keys were flushed`, fix);
    return pass(`Redis answers and kept its keys since ${since} (up ${uptimeS} s)`);
  },
};
