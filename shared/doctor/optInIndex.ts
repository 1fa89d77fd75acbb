import { listOptInIndexes, validOptInIndexes } from '../db/optIn.js';
import { pass, warn, type Check } from './types.js';

/** The recommended opt-in index on DBOS's tables (shared/db/migrations/optin/), built and valid. */
export const indexCheck: Check = {
  id: 'index',
  title: 'the recommended index',
  async run({ db }) {
    const all = await listOptInIndexes();
    const built = await validOptInIndexes(db, all);
    const missing = all.filter((n) => !built.includes(n));
    if (missing.length)
      return warn(
        `not built on "${db.dbosSchema}": ${missing.join(', ')}; recovery and the reaper's owner scans read every PENDING row without it`,
        "afterlife-plane migrate --indexes (CONCURRENTLY, as a role that owns DBOS's tables)",
      );
    return pass(`built: ${built.join(', ')}`);
  },
};
