import type { Db } from '../../packages/executor/src/plane/index.js';
import { missingPrivileges } from '../db/doctor/privileges.js';
import type { RoleNeeds } from './grantsExpected.js';

/** Everything `role` lacks of `needs` in both schemas, as "<privilege> on <object>" lines. */
export async function missingGrants(db: Db, role: string, needs: RoleNeeds): Promise<string[]> {
  const dbos = await missingPrivileges(db, role, {
    schema: db.dbosSchema,
    schemaTables: needs.dbosTables,
    sequences: needs.dbosSequences,
    listed: needs.dbosWrites,
  });
  const own = await missingPrivileges(db, role, {
    schema: db.afterlifeSchema,
    schemaTables: ['SELECT'],
    sequences: false,
    listed: needs.afterlifeWrites,
  });
  return [...dbos, ...own].map((m) => `${m.privilege} on ${m.object}`);
}
