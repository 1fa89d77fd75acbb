import { livenessSessionName, MAX_LIVENESS_LEASE_MS, MIN_LIVENESS_LEASE_MS } from '../../packages/executor/src/plane/index.js';
import { recordedKits, type RecordedKit } from '../db/doctor/kitFacts.js';
import { livenessSessions, type LivenessSession } from '../db/doctor/livenessSessions.js';
import { capped, fail, pass, warn, type Check } from './types.js';

/**
 * The lease in force on each live kit's liveness session, as the server reports it: the lock held by the
 * backend the kit registered, that backend alive, and its silence (pg_stat_activity) within what the kit's
 * once-a-second fence query allows. A session silent longer than that is one the server is not timing.
 */
export const MAX_SILENCE_MS = 5_000;

export const livenessCheck: Check = {
  id: 'liveness',
  title: "the lease on the kits' liveness sessions",
  async run({ db, config }) {
    const sessions = await livenessSessions(db, config.applicationName);
    if (!sessions.length) return pass(`no live kit of "${config.applicationName}" holds a liveness lock to check`);
    const leases = (await recordedKits(db, config.applicationName)).filter((k) => k.liveness);
    const problems = [...sessions.flatMap(problemOf), ...leases.flatMap(leaseProblem)];
    const unseen = sessions.filter((s) => s.sessionExists && s.silentMs === null).length;
    if (problems.length)
      return fail(
        `${problems.length} of ${sessions.length} liveness session(s) do not hold a lease the server keeps`,
        "connect the kit's liveness session to Postgres directly or through a session-mode pooler (AFTERLIFE_LIVENESS_DATABASE_URL), and see the kit's liveness_lease and liveness_lock_busy lines",
        capped(problems),
      );
    const longest = Math.max(0, ...sessions.map((s) => s.silentMs ?? 0));
    if (unseen)
      return warn(
        `${sessions.length} liveness session(s) hold their locks; the silence of ${unseen} is hidden from this role`,
        "run doctor as a role with pg_read_all_stats (the reaper's user has it) to read the sessions' silence",
      );
    const inForce = [...new Set(leases.flatMap((k) => (k.livenessLeaseMs === undefined ? [] : [k.livenessLeaseMs])))].sort((a, b) => a - b);
    const unrecorded = leases.filter((k) => k.livenessLeaseMs === undefined).length;
    return pass(
      `${sessions.length} liveness session(s) hold their locks, longest silence ${longest} ms; the lease the server reports in force on them: ${inForce.length ? inForce.map((ms) => `${ms} ms`).join(', ') : 'not recorded'}${unrecorded ? ` (${unrecorded} kit(s) recorded none)` : ''}`,
      capped(
        leases.map(
          (k) =>
            `executor ${k.executorId}: idle_session_timeout ${k.livenessLeaseMs === undefined ? 'not recorded' : `${k.livenessLeaseMs} ms`}`,
        ),
      ),
    );
  },
};

function problemOf(s: LivenessSession): string[] {
  const who = `executor ${s.executorId}`;
  if (s.pid === null) return [`${who}: registered with a liveness lock but has recorded no session holding it`];
  if (!s.sessionExists) return [`${who}: its registered liveness session (pid ${s.pid}) no longer exists`];
  if (!s.holders.includes(s.pid))
    return [`${who}: its lock is not held by its registered session (pid ${s.pid}); holders: ${s.holders.join(', ') || 'none'}`];
  if (s.silentMs !== null && s.silentMs > MAX_SILENCE_MS)
    return [`${who}: its liveness session (pid ${s.pid}) has been silent ${s.silentMs} ms; the kit speaks on it once a second`];
  return [];
}

/**
 * The lease the server reported in force on the kit's liveness session (idle_session_timeout, read back by the
 * kit after setting it): 0 means the server times nothing — a lost host's lock is held until TCP gives up, so
 * its work waits minutes; outside the contract's bounds the kit itself would have refused it.
 */
function leaseProblem(k: RecordedKit): string[] {
  const ms = k.livenessLeaseMs;
  if (ms === undefined) return [];
  if (ms === 0)
    return [
      `executor ${k.executorId}: no lease in force on its liveness session (idle_session_timeout 0): a lost host's lock is never let go by the server`,
    ];
  if (ms < MIN_LIVENESS_LEASE_MS || ms > MAX_LIVENESS_LEASE_MS)
    return [
      `executor ${k.executorId}: the lease in force on its liveness session is ${ms} ms, outside ${MIN_LIVENESS_LEASE_MS}–${MAX_LIVENESS_LEASE_MS} ms`,
    ];
  return [];
}

/** The liveness session name the kit sets (packages/executor/src/runtime/liveness.ts), which a pooled server session does not keep. */
export function expectedSessionName(s: LivenessSession): string {
  return livenessSessionName(s.executorId, s.incarnation);
}
