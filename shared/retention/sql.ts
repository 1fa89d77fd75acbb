import type pg from 'pg';
import type { Db } from '../db/pool.js';

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
