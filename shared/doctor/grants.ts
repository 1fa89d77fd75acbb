import { currentRole, existingRoles } from '../db/doctor/privileges.js';
import { FUNCTION_ROLES, ROLE_NEEDS } from './grantsExpected.js';
import { missingGrants } from './missingGrants.js';
import { fail, pass, type Check } from './types.js';

/**
 * Each function role's grants (infra/grants.sql), table by table, including tables DBOS or the app's data
 * source created after the grants ran (dbos.transaction_completion): without them the plane's repairs are
 * refused. Without any `<prefix>_*` role (the local stack, one user for everything) the role doctor
 * connects as is checked for all three.
 */
export const grantsCheck: Check = {
  id: 'grants',
  title: "each function role's grants",
  async run({ db, rolePrefix }) {
    const names = FUNCTION_ROLES.map((r) => `${rolePrefix}_${r}`);
    const present = await existingRoles(db, names);
    if (present.length === 0) {
      const me = await currentRole(db);
      const missing = [...new Set((await Promise.all(FUNCTION_ROLES.map((r) => missingGrants(db, me, ROLE_NEEDS[r])))).flat())];
      if (missing.length)
        return fail(`no ${rolePrefix}_* roles, and "${me}" (this connection's role) lacks ${missing.length} grant(s)`, fixText(), missing);
      return pass(`no ${rolePrefix}_* roles: "${me}", the role doctor connects as, has every grant the functions need`);
    }
    const absent = names.filter((n) => !present.includes(n));
    const details: string[] = absent.map((n) => `role "${n}" does not exist`);
    for (const r of FUNCTION_ROLES) {
      const name = `${rolePrefix}_${r}`;
      if (!present.includes(name)) continue;
      for (const m of await missingGrants(db, name, ROLE_NEEDS[r])) details.push(`${name}: ${m}`);
    }
    if (details.length) return fail(`${details.length} grant(s) missing from the function roles`, fixText(), details);
    return pass(`${names.join(', ')} hold every grant their function needs, on every table of both schemas`);
  },
};

const fixText = () =>
  'rerun infra/grants.sql as the owner of both schemas (terraform output -raw database_grants_sql); it grants tables created since and sets default privileges for tables created later (docs/operations.md#check-grants)';
