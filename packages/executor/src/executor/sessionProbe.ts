import pg from 'pg';
import { ConfigError } from '../errors.js';
import { type BackendIdentity, backendIdentity, beginProbe } from '../db/queries/liveness.js';
import { maskUrl } from './maskUrl.js';

/**
 * Whether the liveness connection is one server session (issue 27). Behind a pooler in transaction mode
 * (PgBouncer `pool_mode = transaction`) each statement may run on whichever server backend is free, and the
 * session-level state the liveness protocol rests on — the advisory lock, `idle_session_timeout`, LISTEN —
 * stays on a pooled backend that outlives the kit: a SIGKILLed executor then looks alive for as long as the
 * pool keeps that backend (measured: 40 s, until the load stopped). A quiet pool may hand one client the
 * same backend every time, so two statements in a row prove nothing; this makes the pool choose:
 *
 *   1. the liveness connection asks which backend it is on (pid and start time);
 *   2. a second, short-lived probe connection to the same URL opens a transaction (a transaction-mode
 *      pooler must pin a backend to it, and hands out the one just freed) and asks the same;
 *   3. the liveness connection asks again, while the probe still holds its backend.
 *
 * A real session (direct, or a session-mode pooler) answers 1 and 3 alike and never shares its backend
 * with the probe. Any other answer is a pooler that moves the session, as is a probe transaction refused
 * for "statement mode" (PgBouncer `pool_mode = statement`). A probe that cannot connect or gets
 * no backend in time (a session-mode pool that is full) proves nothing: the answer is then "one session"
 * as far as can be told, and the periodic comparison (`sameBackend`) keeps watching.
 */
const PROBE_TIMEOUT_MS = 2_000;

export class NotOneSessionError extends ConfigError {
  constructor(why: string, url: string) {
    super([
      `the liveness connection (${maskUrl(url)}) is not one Postgres session: ${why}. A pooler in transaction mode ` +
        `sits between the kit and Postgres; the liveness lock would stay on a pooled session after this process dies, ` +
        `and its death would go unseen. Set AFTERLIFE_LIVENESS_DATABASE_URL (option livenessDatabaseUrl) to a direct ` +
        `route to Postgres or to a session-mode pooler; DBOS's own URL may stay pooled (docs/liveness.md#poolers-and-proxies)`,
    ]);
  }
}

export function sameBackend(a: BackendIdentity, b: BackendIdentity): boolean {
  return a.pid === b.pid && a.startedAt === b.startedAt;
}

export function describeMove(a: BackendIdentity, b: BackendIdentity): string {
  return `its statements ran on backend ${a.pid} (started ${a.startedAt}), then on backend ${b.pid} (started ${b.startedAt})`;
}

/** Steps 1–3 above: the backend of the liveness connection, or a NotOneSessionError. */
export async function proveOneSession(client: pg.Client, url: string, probeName: string): Promise<BackendIdentity> {
  const first = await backendIdentity(client);
  const probe = new pg.Client({
    connectionString: url,
    application_name: probeName,
    connectionTimeoutMillis: PROBE_TIMEOUT_MS,
    query_timeout: PROBE_TIMEOUT_MS,
  });
  probe.on('error', () => undefined);
  let other: BackendIdentity | undefined;
  try {
    await probe.connect();
    await beginProbe(probe);
    other = await backendIdentity(probe);
    if (sameBackend(first, other)) {
      throw new NotOneSessionError(`a second connection was handed its backend ${first.pid} while it was still open`, url);
    }
    const again = await backendIdentity(client);
    if (!sameBackend(first, again)) throw new NotOneSessionError(describeMove(first, again), url);
    return first;
  } catch (err) {
    if (err instanceof NotOneSessionError || other !== undefined) throw err;
    // PgBouncer in statement mode refuses the probe's transaction outright: a pool, and the worst kind.
    if (err instanceof Error && /statement (pooling )?mode/i.test(err.message))
      throw new NotOneSessionError(`the pooler refused a transaction (${err.message})`, url);
    // The probe itself failed (connections exhausted, a full session-mode pool): no evidence either way.
    return first;
  } finally {
    await probe.end().catch(() => undefined);
  }
}
