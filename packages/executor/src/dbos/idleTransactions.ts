// The kit's one question to DBOS's own system-database pool (packages/executor/src/runtime/idleTransactions.ts says why it
// asks): the idle_in_transaction_session_timeout DBOS's transactions really run with, and whose it is.

export type IdleTransactionLimit = { ms: number; role: string; database: string } | undefined;

/** DBOS's pool as far as this needs it (the kit finds it inside the launched DBOS, packages/executor/src/runtime/dbosInternals.ts). */
export interface PoolLike {
  query(text: string): Promise<{ rows: Array<Record<string, unknown>> }>;
}

export async function readIdleTransactionSetting(pool: PoolLike): Promise<IdleTransactionLimit> {
  const res = await pool.query(`SELECT setting::bigint::text AS ms, current_user::text AS role, current_database()::text AS database
                    FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'`);
  const row = res.rows[0];
  if (!row || typeof row.ms !== 'string') return undefined;
  return { ms: Number(row.ms), role: String(row.role), database: String(row.database) };
}
