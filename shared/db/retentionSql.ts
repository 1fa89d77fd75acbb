import pg from 'pg';
import type { Db } from '../../packages/executor/src/plane/index.js';

/**
 * Runs one retention statement with JIT off. The `held` predicate's correlated subplans give these
 * statements planner costs in the millions though they touch a few hundred rows, and Postgres's default
 * jit_above_cost then spends seconds compiling each one (measured: 6.2 s for a 17 ms batch read on a
 * loaded machine). `SET LOCAL` scopes it to this transaction: BEGIN, SET, the statement, COMMIT.
 *
 * `heldMs` is measured from just before the statement is sent to just after its COMMIT returns: row
 * locks a delete takes are held for no longer than that.
 */
export async function retentionQuery<R extends pg.QueryResultRow>(
  db: Db,
  text: string,
  values: unknown[],
  tag: string,
): Promise<pg.QueryResult<R> & { heldMs: number }> {
  let t0 = 0;
  const r = await db.transaction(async (c) => {
    await c.query('SET LOCAL jit = off');
    t0 = performance.now();
    return c.query<R>(text, values);
  }, tag);
  return Object.assign(r, { heldMs: Math.round((performance.now() - t0) * 100) / 100 });
}

/** SQLSTATE query_canceled: statement_timeout fired (or someone cancelled the backend). */
export const QUERY_CANCELED = '57014';

/**
 * Runs one statement that takes row locks so that they are held for at most `timeoutMs` of server time,
 * by construction: one simple-protocol message — `SET LOCAL`s and the statement in Postgres's implicit
 * transaction, which commits at the end of the message — so the locks are released by the server before
 * the result travels back; no round trip to this process (whose event loop a loaded machine can stall for
 * tens of ms) sits between the statement and its COMMIT, as it does with BEGIN … COMMIT. `statement_timeout`
 * cancels the statement (and so releases its locks) once it has run that long; the caller then retries
 * smaller. `synchronous_commit = off` keeps the WAL flush out of the hold: a crash can lose the last
 * fraction of a second of deletes, which only means the next round deletes those workflows again.
 * One message, so it is safe behind a pooler in transaction mode too (SET LOCAL dies with the transaction).
 *
 * The simple protocol takes no parameters: values must be inlined with `literal()`. `timeoutMs`
 * undefined: no statement_timeout of ours (the session's stays).
 *
 * `heldMs` is from send to the server's ReadyForQuery as this process sees it: an upper bound on how
 * long the locks were held (it also counts the trip back and this process's own scheduling delay).
 */
export async function lockBoundedStatement<R extends pg.QueryResultRow>(
  db: Db,
  text: string,
  tag: string,
  timeoutMs: number | undefined,
): Promise<{ rows: R[]; heldMs: number }> {
  const timeout = timeoutMs === undefined ? '' : `SET LOCAL statement_timeout = ${Math.max(1, Math.round(timeoutMs))}; `;
  const t0 = performance.now();
  const out = (await db.query(`SET LOCAL jit = off; SET LOCAL synchronous_commit = off; ${timeout}${text}`, undefined, tag)) as unknown;
  const heldMs = Math.round((performance.now() - t0) * 100) / 100;
  // A multi-statement message resolves to one result per statement; the statement's is the last.
  const results = (Array.isArray(out) ? out : [out]) as Array<pg.QueryResult<R>>;
  return { rows: results.at(-1)?.rows ?? [], heldMs };
}

/** A value as an SQL literal, for lockBoundedStatement's parameterless message. */
export function literal(v: string | number | null | undefined | readonly string[]): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new Error(`not an integer for an SQL literal: ${v}`);
    return String(v);
  }
  if (typeof v === 'string') return pg.escapeLiteral(v);
  return `ARRAY[${v.map((x) => pg.escapeLiteral(x)).join(', ')}]::text[]`;
}
