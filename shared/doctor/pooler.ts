import { recentKitRefusals } from '../db/doctor/kitRefusals.js';
import { livenessSessions } from '../db/doctor/livenessSessions.js';
import { expectedSessionName } from './liveness.js';
import { capped, fail, pass, type Check } from './types.js';

/**
 * A pooler in transaction mode between a kit and Postgres: the kit's lock lands on a pooled server session
 * that other clients then use, so it outlives the kit (a SIGKILLed executor stays undeclared while the pool
 * is busy). The server shows it: the backend holding the lock carries another client's
 * application_name (PgBouncer sets each client's on the server session it hands out), or holds several kits'
 * liveness locks at once.
 */
export const poolerCheck: Check = {
  id: 'pooler',
  title: 'no transaction-mode pooler on the liveness sessions',
  async run({ db, config }) {
    const sessions = (await livenessSessions(db, config.applicationName)).filter((s) => s.pid !== null && s.sessionExists);
    const details: string[] = sessions.flatMap((s) => {
      const expected = expectedSessionName(s);
      const out: string[] = [];
      if (s.sessionName !== null && s.sessionName !== expected)
        out.push(
          `executor ${s.executorId}: its lock is on backend ${s.pid}, now named "${s.sessionName}" (the kit's session is "${expected}")`,
        );
      if (s.kitLocksOnBackend > 1)
        out.push(`executor ${s.executorId}: backend ${s.pid} holds the liveness locks of ${s.kitLocksOnBackend} kits`);
      return out;
    });
    // Kits that saw it themselves and refused to attach (they exited without registering).
    for (const r of await recentKitRefusals(db, config.applicationName))
      details.push(`executor ${r.executorId}: refused to attach at ${r.refusedAt} (${r.reason}): ${r.detail}`);
    if (details.length)
      return fail(
        `${details.length} sign(s) that kits' liveness sessions go through a pooler in transaction mode: their locks outlive them`,
        'give the kit a direct connection (or a session-mode pooler) for its liveness session: AFTERLIFE_LIVENESS_DATABASE_URL (docs/liveness.md#poolers-and-proxies)',
        capped(details),
      );
    return pass(`${sessions.length} liveness session(s), each its own server session`);
  },
};
