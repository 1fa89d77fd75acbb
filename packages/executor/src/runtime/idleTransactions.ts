import { withTimeout } from '../lifecycle/orderedShutdown.js';
import type { Logger } from '../log.js';
import { launchedDbosExecutor } from './dbosInternals.js';
import { type IdleTransactionLimit, type PoolLike, readIdleTransactionSetting } from '../dbos/idleTransactions.js';

/**
 * A host lost while one of DBOS's connections is inside a transaction keeps that transaction's row locks
 * on DBOS's tables for as long as its session lives — through Cloud SQL's proxy or the connector, which
 * keep their own leg to Postgres open, possibly for good. Recovery passes such rows over (and moves them
 * once the lock is gone), but only the server can end the session: `idle_in_transaction_session_timeout`.
 * DBOS 5.3 sets it (60 s) on every connection of a pool it builds, unless the app passes its own pool,
 * sets `systemDatabaseIdleTransactionTimeoutMs` to 0, or puts the setting in the URL's `options`; then the
 * role's or database's value applies, and Postgres's default is 0 (never). See docs/lost-transactions.md.
 *
 * Asked once at attach, on a connection of DBOS's own system-database pool (what its transactions really
 * run with), bounded, and never fatal: a kit that cannot ask says nothing.
 */
export type { IdleTransactionLimit };

/** DBOS's system-database pool in the copy the app launched (dbosInternals.ts); undefined when a release moves it. */
async function dbosPool(): Promise<PoolLike | undefined> {
  const executor = launchedDbosExecutor() as { systemDatabase?: { pool?: unknown } } | undefined;
  const pool = executor?.systemDatabase?.pool as { query?: unknown } | undefined;
  return typeof pool?.query === 'function' ? (pool as PoolLike) : undefined;
}

export async function readIdleTransactionLimit(pool: PoolLike | undefined, timeoutMs = 2_000): Promise<IdleTransactionLimit> {
  if (!pool) return undefined;
  try {
    return await withTimeout(readIdleTransactionSetting(pool), timeoutMs);
  } catch {
    return undefined;
  }
}

/** Warns once (at attach) when DBOS's connections would keep a lost transaction open forever. */
export async function checkIdleTransactionLimit(log: Logger, pool?: PoolLike): Promise<IdleTransactionLimit> {
  const limit = await readIdleTransactionLimit(pool ?? (await dbosPool()));
  if (limit?.ms === 0) {
    log.warn(
      'idle_in_transaction_session_timeout is 0 on DBOS system-database connections: a host lost inside a transaction ' +
        'keeps its row locks for as long as its session lives (through a proxy, possibly forever), and those workflows ' +
        `are not recovered until it ends. Set it, e.g. ALTER ROLE "${quoted(limit.role)}" IN DATABASE "${quoted(limit.database)}" SET ` +
        "idle_in_transaction_session_timeout = '60s', or leave DBOS's systemDatabaseIdleTransactionTimeoutMs at its default " +
        '(docs/lost-transactions.md)',
      { event: 'idle_transactions_unbounded', role: limit.role, database: limit.database },
    );
  }
  return limit;
}

const quoted = (name: string) => name.replaceAll('"', '""');
