import { type Db, DbosSchemaError, ident } from '../../packages/executor/src/plane/index.js';

/** DBOS 5.2 added ownership fencing (owner_xid checks); everything afterlife writes relies on it. */
export const MIN_DBOS_MIGRATION = 123;

export async function checkDbosSchema(db: Db): Promise<{ version: number }> {
  const s = db.dbosSchema;
  const exists = await db.query<{ present: boolean }>(
    `SELECT to_regclass($1) IS NOT NULL AS present`,
    [`${ident(s)}.dbos_migrations`],
    'dbos.schema',
  );
  if (!exists.rows[0]?.present) {
    throw new DbosSchemaError(
      `DBOS system schema "${s}" not found in this database. Point DATABASE_URL at the DBOS system database ` +
        `(the one your app's systemDatabaseUrl names), set DBOS_SYSTEM_SCHEMA if you changed systemDatabaseSchemaName, ` +
        `or launch the app once (or run \`npx dbos schema\`) so DBOS creates it.`,
    );
  }
  const res = await db.query<{ version: string }>(`SELECT max(version)::text AS version FROM ${ident(s)}.dbos_migrations`);
  const version = Number(res.rows[0]?.version ?? 0);
  if (version < MIN_DBOS_MIGRATION) {
    throw new DbosSchemaError(
      `DBOS system schema "${s}" is at migration ${version}; afterlife needs ${MIN_DBOS_MIGRATION} or later ` +
        `(@dbos-inc/dbos-sdk 5.2+). Upgrade the SDK in your app and launch it once, or run \`npx dbos schema\`.`,
    );
  }
  return { version };
}
