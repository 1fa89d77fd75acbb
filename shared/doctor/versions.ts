import { NEWEST_TESTED_DBOS_MIGRATION, readDbosSchemaVersion, TESTED_DBOS_VERSIONS } from '../dbos/schemaGuard.js';
import { fail, pass, type Check } from './types.js';

/**
 * DBOS's version as the database records it (its system schema's migration): the plane writes DBOS's tables
 * directly and refuses a schema newer than DBOS_SCHEMA_MAX_VERSION at start; doctor says so before a deploy.
 */
export const versionsCheck: Check = {
  id: 'versions',
  title: "DBOS's version in the supported range",
  async run({ db, config }) {
    const version = await readDbosSchemaVersion(db);
    const max = config.dbosSchemaMaxVersion;
    if (version > max)
      return fail(
        `DBOS's system schema "${config.dbosSchema}" is at migration ${version}, newer than ${max} (tested: migration ${NEWEST_TESTED_DBOS_MIGRATION}, @dbos-inc/dbos-sdk ${TESTED_DBOS_VERSIONS}); the plane refuses to start`,
        `upgrade afterlife, or check DBOS's recovery, cancel, fork and rewind statements are unchanged and set DBOS_SCHEMA_MAX_VERSION=${version}`,
      );
    return pass(
      `DBOS's system schema is at migration ${version} (accepted up to ${max}; tested with @dbos-inc/dbos-sdk ${TESTED_DBOS_VERSIONS})`,
    );
  },
};
