import { type Db, DbosSchemaError, ident } from '../../packages/executor/src/plane/index.js';

/**
 * afterlife writes DBOS's tables directly (recovery, cancel, the reaper's statements), so a DBOS upgrade
 * that migrates the system schema can silently change what those statements mean. This refuses to start
 * against a schema newer than the newest afterlife was tested on: `allMigrations` has 123 entries in
 * @dbos-inc/dbos-sdk 5.2.11 and 5.3.0 (`dist/src/sysdb_migrations/internal/migrations.js`), and
 * `dbos_migrations.version` is that count. An operator who checked a newer DBOS raises
 * DBOS_SCHEMA_MAX_VERSION to its version.
 */
export const NEWEST_TESTED_DBOS_MIGRATION = 123;
export const TESTED_DBOS_VERSIONS = '5.2.11 and 5.3.0';

/** The DBOS system schema's migration (`dbos_migrations.version`); 0 when none is recorded. */
export async function readDbosSchemaVersion(db: Db): Promise<number> {
  const res = await db.query<{ version: string | null }>(
    `SELECT max(version)::text AS version FROM ${ident(db.dbosSchema)}.dbos_migrations`,
    [],
    'dbos.schemaGuard',
  );
  return Number(res.rows[0]?.version ?? 0);
}

export async function guardDbosSchemaVersion(db: Db, maxVersion: number): Promise<{ version: number }> {
  const version = await readDbosSchemaVersion(db);
  if (version > maxVersion) {
    throw new DbosSchemaError(
      `DBOS system schema "${db.dbosSchema}" is at migration ${version}, newer than ${maxVersion}, the newest this afterlife accepts ` +
        `(tested on migration ${NEWEST_TESTED_DBOS_MIGRATION}: @dbos-inc/dbos-sdk ${TESTED_DBOS_VERSIONS}). afterlife writes DBOS's tables ` +
        `directly, and a newer schema may change what its statements mean. Upgrade afterlife, or, once you have checked ` +
        `that DBOS's recovery, cancel, fork and rewind statements are unchanged, set DBOS_SCHEMA_MAX_VERSION=${version}.`,
    );
  }
  return { version };
}
