import { appScope, type Db, ident } from '../../packages/executor/src/plane/index.js';

/**
 * The workflow statuses afterlife knows, and what it does with each (docs/design.md, "Statuses"). Every
 * statement that writes DBOS's tables names the statuses it acts on (`status = 'PENDING'`, `status IN (…)`),
 * never the ones it does not (`status <> 'X'`), so a status DBOS adds later — `SUSPENDED` (DBOS Java 1.4,
 * TypeScript 5.5, Python 3.5), or any other, which DBOS itself reads as UNKNOWN — is never recovered,
 * reaped, timed out, retained or forked. The one negative list below is a reading: which rows were left alone.
 */
export const ACTED_ON = ['PENDING', 'ENQUEUED', 'DELAYED', 'SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED'] as const;

/** Statuses DBOS writes that afterlife knows and deliberately never touches. */
export const LEFT_TO_DBOS: Record<string, string> = {
  SUSPENDED: 'a suspended wait (recv/sleep) DBOS itself resumes; no process holds it',
};

/** How long the probe may read: it has no index to use, and a recovery must never wait on it. */
export const LEFT_ALONE_PROBE_MS = 250;
/** At most this many rows are counted; past it the count says "at least". */
export const LEFT_ALONE_LIMIT = 100;

export interface LeftAlone {
  status: string;
  count: number;
}

/**
 * Rows of an executor (this application's scope) whose status afterlife never acts on: SUSPENDED and any
 * status it does not know, NULL included. For the recovery's report only (it moved none of them), so it
 * is bounded — LEFT_ALONE_LIMIT rows, LEFT_ALONE_PROBE_MS of server time — and answers undefined when it
 * ran out of time (no index serves "this executor's rows in no known status"; on a large table a full
 * read is not worth a recovery's time).
 */
export async function leftAloneRows(db: Db, applicationName: string, executorId: string): Promise<LeftAlone[] | undefined> {
  const ws = `${ident(db.dbosSchema)}.workflow_status`;
  try {
    return await db.transaction(async (c) => {
      await c.query(`SET LOCAL statement_timeout = ${LEFT_ALONE_PROBE_MS}`);
      const res = await c.query<{ status: string | null; n: number }>(
        `SELECT status, count(*)::int AS n FROM (
           SELECT w.status FROM ${ws} w
            WHERE w.executor_id = $1 AND ${appScope('w.application_name', '$2')}
              AND (w.status IS NULL OR w.status <> ALL ($3::text[]))
            LIMIT $4) x
          GROUP BY status ORDER BY status`,
        [executorId, applicationName, [...ACTED_ON], LEFT_ALONE_LIMIT],
      );
      return res.rows.map((r) => ({ status: r.status ?? 'NULL', count: r.n }));
    }, 'recover.leftAlone');
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code === '57014') return undefined;
    throw err;
  }
}

/** Why a row in `status` was left alone, for the report. */
export function whyLeftAlone(status: string): string {
  return LEFT_TO_DBOS[status] ?? 'a status this afterlife does not know (a newer DBOS?): never touched; upgrade afterlife';
}
