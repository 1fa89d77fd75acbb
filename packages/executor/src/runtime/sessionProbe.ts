import pg from 'pg';
import { ConfigError, errorMessage } from '../errors.js';
import { type BackendIdentity, backendIdentity, beginProbe, lastStatementOf } from '../db/queries/liveness.js';
import { maskUrl } from './maskUrl.js';

/**
 * Whether the liveness connection is one server session. Behind a pooler in transaction mode (PgBouncer
 * `pool_mode = transaction`) each statement may run on whichever server backend is free, and the
 * session-level state the liveness protocol rests on — the advisory lock, `idle_session_timeout`, LISTEN —
 * stays on a pooled backend that outlives the kit: a SIGKILLed executor then looks alive for as long as the
 * pool keeps that backend busy. A quiet pool may hand one client the same backend every time, and a busy one
 * may hand it back after lending it out, so two statements in a row prove nothing; instead:
 *
 *   1. the liveness connection asks which backend it is on (pid, start time, and when this statement started);
 *   2. a second, short-lived probe connection to the same URL opens a transaction (a transaction-mode pooler
 *      must pin a backend to it, and hands out the one just freed) and asks the same, then reads what the
 *      liveness backend did since: a backend that is ours alone is idle with our statement its last one;
 *   3. the liveness connection asks again, while the probe still holds its backend.
 *
 * A real session (direct, through a TCP proxy, or a session-mode pooler) answers 1 and 3 alike, never
 * shares its backend with the probe, and nobody else runs a statement on it. Any other answer is a pooler
 * that lends the session out, as is a probe transaction refused for "statement mode" (PgBouncer
 * `pool_mode = statement`). A probe that cannot connect, gets no backend in time, or may not see the
 * liveness backend has not ruled a pooler out: that is a refusal at attach (a busy transaction-mode pool
 * looks exactly like this), and a failed reconnect later (the lock is not retaken until a probe rules it out).
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

/** The probe could not tell: no pooler was ruled out (see above: a refusal at attach, a retry later). */
export class ProbeInconclusiveError extends Error {
  override name = 'ProbeInconclusiveError';
  constructor(readonly why: string) {
    super(`the session probe could not rule out a transaction-mode pooler: ${why}`);
  }
}

/** The refusal an inconclusive probe turns into at attach. */
export function inconclusiveRefusal(err: ProbeInconclusiveError, url: string): NotOneSessionError {
  return new NotOneSessionError(
    `a pooler could not be ruled out (${err.why}; a transaction-mode pool that is busy looks exactly like this, ` +
      `and a session-mode pool must have room for one more connection for a moment at attach)`,
    url,
  );
}

export function sameBackend(a: BackendIdentity, b: BackendIdentity): boolean {
  return a.pid === b.pid && a.startedAt === b.startedAt;
}

export function describeMove(a: BackendIdentity, b: BackendIdentity): string {
  return `its statements ran on backend ${a.pid} (started ${a.startedAt}), then on backend ${b.pid} (started ${b.startedAt})`;
}

/** Steps 1–3 above: the backend of the liveness connection, a NotOneSessionError, or a ProbeInconclusiveError. */
export async function proveOneSession(client: pg.Client, url: string, probeName: string): Promise<BackendIdentity> {
  const first = await backendIdentity(client);
  const probe = new pg.Client({
    connectionString: url,
    application_name: probeName,
    connectionTimeoutMillis: PROBE_TIMEOUT_MS,
    query_timeout: PROBE_TIMEOUT_MS,
  });
  probe.on('error', () => undefined);
  try {
    const { other, since } = await probeBeside(probe, first.pid, url);
    if (sameBackend(first, other)) {
      throw new NotOneSessionError(`a second connection was handed its backend ${first.pid} while it was still open`, url);
    }
    if (since.startedAt === null || since.queryStart === null) {
      throw new ProbeInconclusiveError(`the probe may not see backend ${first.pid} (gone, or another role's)`);
    }
    if (since.startedAt !== first.startedAt || since.queryStart !== first.queryStart || since.state !== 'idle') {
      throw new NotOneSessionError(
        `its backend ${first.pid} ran another client's statement between two of its own (the last one started ` +
          `${since.queryStart}, state ${since.state ?? 'unknown'}; its own started ${first.queryStart})`,
        url,
      );
    }
    const again = await backendIdentity(client);
    if (!sameBackend(first, again)) throw new NotOneSessionError(describeMove(first, again), url);
    return first;
  } finally {
    await probe.end().catch(() => undefined);
  }
}

/** Step 2 on the probe connection; its failures are the probe's (inconclusive), except statement mode's refusal. */
async function probeBeside(
  probe: pg.Client,
  pid: number,
  url: string,
): Promise<{ other: BackendIdentity; since: Awaited<ReturnType<typeof lastStatementOf>> }> {
  try {
    await probe.connect();
    await beginProbe(probe);
    const other = await backendIdentity(probe);
    return { other, since: await lastStatementOf(probe, pid) };
  } catch (err) {
    const message = errorMessage(err);
    // PgBouncer in statement mode refuses the probe's transaction outright: a pool, and the worst kind.
    if (/statement (pooling )?mode/i.test(message)) throw new NotOneSessionError(`the pooler refused a transaction (${message})`, url);
    throw new ProbeInconclusiveError(`the probe connection failed or got no backend within ${PROBE_TIMEOUT_MS} ms: ${message}`);
  }
}
