import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * The roles an application's kits connect as (their registry and liveness sessions in pg_stat_activity,
 * which shows every session's user to any role), and each one's idle_in_transaction_session_timeout as the
 * server would start a session of that role in this database: role-and-database, role, then database
 * settings (pg_db_role_setting), then the server's own value. `server` is null when this session's value came
 * from its own role or database (then the server's value is not readable from here).
 */
export interface AppRoleSetting {
  role: string;
  database: string;
  roleInDatabase: string | null;
  roleOnly: string | null;
  databaseOnly: string | null;
  server: string | null;
}

export async function appRoleSettings(db: Db, applicationName: string, setting: string): Promise<AppRoleSetting[]> {
  const res = await db.query<{
    role: string;
    database: string;
    role_db: string | null;
    role_only: string | null;
    db_only: string | null;
    server: string | null;
  }>(
    `WITH kits AS (
       SELECT executor_id, liveness_pid FROM ${ident(db.afterlifeSchema)}.executors
        WHERE application_name = $1 AND state IN ('alive', 'draining')
     ),
     roles AS (
       SELECT DISTINCT a.usesysid AS oid, a.usename::text AS role FROM pg_stat_activity a
        WHERE a.datname = current_database() AND a.usesysid IS NOT NULL
          AND EXISTS (SELECT 1 FROM kits k WHERE a.pid = k.liveness_pid OR a.application_name = left('afterlife_kit_' || k.executor_id, 63))
     ),
     one AS (SELECT oid AS dbid FROM pg_database WHERE datname = current_database())
     SELECT r.role, current_database()::text AS database,
            (SELECT substr(s, length($2) + 2) FROM pg_db_role_setting d, unnest(d.setconfig) s, one
              WHERE d.setrole = r.oid AND d.setdatabase = one.dbid AND s LIKE $2 || '=%') AS role_db,
            (SELECT substr(s, length($2) + 2) FROM pg_db_role_setting d, unnest(d.setconfig) s
              WHERE d.setrole = r.oid AND d.setdatabase = 0 AND s LIKE $2 || '=%') AS role_only,
            (SELECT substr(s, length($2) + 2) FROM pg_db_role_setting d, unnest(d.setconfig) s, one
              WHERE d.setrole = 0 AND d.setdatabase = one.dbid AND s LIKE $2 || '=%') AS db_only,
            (SELECT reset_val || COALESCE(unit, '') FROM pg_settings
              WHERE name = $2 AND source NOT IN ('database', 'user', 'database user', 'session', 'client')) AS server
       FROM roles r ORDER BY 1`,
    [applicationName, setting],
    'doctor.appRoleSettings',
  );
  return res.rows.map((r) => ({
    role: r.role,
    database: r.database,
    roleInDatabase: r.role_db,
    roleOnly: r.role_only,
    databaseOnly: r.db_only,
    server: r.server,
  }));
}

/** The statement that bounds lost transactions for one role in one database (doctor's fix text). */
export function boundIdleTransactionsSql(role: string, database: string): string {
  const q = (name: string) => `"${name.replaceAll('"', '""')}"`;
  return `ALTER ROLE ${q(role)} IN DATABASE ${q(database)} SET idle_in_transaction_session_timeout = '60s'`;
}
