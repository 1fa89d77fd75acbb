import { livenessSessions } from '../db/doctor/livenessSessions.js';
import { beatEvidence, heartbeatKey, listExecutors, readHeartbeat, DEFAULT_KEY_PREFIX } from '../../packages/executor/src/plane/index.js';
import { fail, pass, warn, type Check, type DoctorDeps } from './types.js';

/**
 * Configuration the plane and the kits disagree on, from what each side wrote: the kits' heartbeats (the
 * interval and TTL each kit set, under the plane's Redis and key prefix) and their registrations (liveness
 * on or off) against the plane's HEARTBEAT_TTL_MS, HEARTBEAT_INTERVAL_MS, REDIS_KEY_PREFIX and
 * REAPER_LIVENESS_EVIDENCE. A live kit whose heartbeat the plane cannot find (another Redis, another prefix)
 * or cannot use (outside the bounds) is judged without it: a FAIL.
 */
export const settingsCheck: Check = {
  id: 'settings',
  title: 'settings the plane and the kits agree on',
  async run(deps) {
    const { db, config } = deps;
    const app = config.applicationName;
    const rows = await listExecutors(db, app, ['alive', 'draining']);
    const sessions = await livenessSessions(db, app);
    // A kit holding its lock is alive now; a row whose kit was just killed is the reaper's to judge, not ours.
    const live = rows.filter(
      (r) => !r.liveness || sessions.some((s) => s.executorId === r.executor_id && s.pid !== null && s.holders.includes(s.pid)),
    );
    const fails: string[] = [];
    const warns: string[] = [];
    if (config.reaper.livenessEvidence === 'none' && live.some((r) => r.liveness))
      warns.push(
        'REAPER_LIVENESS_EVIDENCE=none on the plane, but kits hold liveness locks: a SIGKILL is found a heartbeat TTL later instead of at once',
      );
    await compareBeats(
      deps,
      live.filter((r) => r.heartbeats).map((r) => r.executor_id),
      fails,
      warns,
    );
    if (fails.length)
      return fail(
        `${fails.length} live kit(s) the plane cannot judge by their heartbeat`,
        `give the kits and the plane the same REDIS_URL and REDIS_KEY_PREFIX ("${config.redis?.keyPrefix ?? DEFAULT_KEY_PREFIX}" on the plane) and heartbeat settings within the bounds (docs/configuration.md)`,
        [...fails, ...warns],
      );
    if (warns.length)
      return warn(
        `${warns.length} setting(s) differ between the plane and its kits`,
        'set HEARTBEAT_TTL_MS and HEARTBEAT_INTERVAL_MS (and the liveness settings) alike on both sides',
        warns,
      );
    return pass(`${live.length} live kit(s) agree with the plane's settings`);
  },
};

async function compareBeats(deps: DoctorDeps, ids: string[], fails: string[], warns: string[]): Promise<void> {
  const { config, redis } = deps;
  if (!redis || !config.redis || ids.length === 0) return;
  const prefix = config.redis.keyPrefix;
  for (const id of ids) {
    const reading = await readHeartbeat(redis, heartbeatKey(config.applicationName, id, prefix));
    if (!reading) {
      fails.push(
        `executor ${id}: registered with heartbeats, but no heartbeat under "${heartbeatKey(config.applicationName, id, prefix)}" in the plane's Redis`,
      );
      continue;
    }
    const e = beatEvidence(reading, Date.now(), config.heartbeatIntervalMs);
    if (e.kind === 'none') {
      fails.push(`executor ${id}: its heartbeat is no evidence to the plane (${e.why})`);
      continue;
    }
    const v = e.value;
    if (v.ttlMs !== undefined && v.ttlMs !== config.heartbeatTtlMs)
      warns.push(`executor ${id}: heartbeat TTL ${v.ttlMs} ms, the plane's HEARTBEAT_TTL_MS ${config.heartbeatTtlMs} ms`);
    if (v.beatEveryMs !== undefined && v.beatEveryMs !== config.heartbeatIntervalMs)
      warns.push(`executor ${id}: beats every ${v.beatEveryMs} ms, the plane's HEARTBEAT_INTERVAL_MS ${config.heartbeatIntervalMs} ms`);
  }
}
