import { appliedMigrationNames, migrate as migrateAfterlife } from '../../shared/db/migrate.js';
import { applyOptInIndexes } from '../../shared/db/optIn.js';
import { migrateDbosSchema } from '../../shared/dbos/migrate.js';
import { checkDbosSchema } from '../../shared/dbos/schema.js';
import type { CliContext } from '../context.js';
import type { MigrateOutput } from '../schemas.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife-plane migrate [--dbos]`: applies afterlife's own migrations (idempotent, under an advisory lock).
 * With --dbos it first creates or upgrades DBOS's system schema through DBOS itself — once, before any
 * executor launches, because concurrent DBOS launches race on a fresh database. With --indexes it then
 * builds the opt-in indexes on DBOS's tables (shared/db/migrations/optin/): CONCURRENTLY, so DBOS keeps
 * writing, and by a role that owns DBOS's tables; an operator chooses when, since a build reads the table.
 */
export async function migrate(ctx: CliContext, o: { dbos: boolean; indexes: boolean }): Promise<CommandResult<MigrateOutput>> {
  const { db, config } = ctx;
  if (o.dbos) {
    if (config.database.kind !== 'url') throw new Error('--dbos needs DATABASE_URL (DBOS migrates over its own connection)');
    ctx.progress(`migrating DBOS's system schema "${config.dbosSchema}"…`);
    await migrateDbosSchema(config.database.url, config.dbosSchema);
  }
  const { version } = await checkDbosSchema(db);
  ctx.progress(`applying afterlife migrations to "${config.afterlifeSchema}"…`);
  const { applied } = await migrateAfterlife(db);
  let indexes: string[] = [];
  if (o.indexes) {
    ctx.progress(`building opt-in indexes on "${config.dbosSchema}" CONCURRENTLY (DBOS keeps writing meanwhile)…`);
    indexes = await applyOptInIndexes(db);
  }
  const current = await appliedMigrationNames(db, config.afterlifeSchema);
  const out: MigrateOutput = {
    command: 'migrate',
    dbosSchema: config.dbosSchema,
    afterlifeSchema: config.afterlifeSchema,
    dbosMigration: version,
    applied,
    current,
    indexes,
  };
  const text =
    (applied.length ? `applied ${applied.length} migration(s): ${applied.join(', ')}\n` : 'afterlife schema is up to date\n') +
    `schema "${config.afterlifeSchema}" is at ${out.current.at(-1) ?? '(empty)'}; DBOS system schema "${config.dbosSchema}" at migration ${version}\n` +
    (indexes.length ? `opt-in indexes in place on "${config.dbosSchema}": ${indexes.join(', ')}\n` : '');
  return { json: out, text, exitCode: 0 };
}
