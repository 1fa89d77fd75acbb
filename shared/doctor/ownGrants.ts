import { currentRole } from '../db/doctor/privileges.js';
import type { Db, Logger } from '../../packages/executor/src/plane/index.js';
import { FUNCTION_ROLES, type FunctionRole, ROLE_NEEDS, type RoleNeeds, roleOfTarget } from './grantsExpected.js';
import { missingGrants } from './missingGrants.js';

/**
 * A function checks its own database role at start (shared/runtime.ts): every table of DBOS's schema,
 * including ones DBOS or the app's data source created after infra/grants.sql ran, and afterlife's. What is
 * missing is one WARNING naming the grants and the fix, at start, instead of a repair refused much later
 * with `permission denied` (a stuck workflow left CANCELLED because dbos.transaction_completion was
 * unreadable). Never fatal: the function still serves what its grants allow.
 */
const SHOWN = 12;

export async function checkOwnGrants(db: Db, logger: Logger, functionTarget: string | undefined): Promise<string[]> {
  const role = roleOfTarget(functionTarget);
  const needs = role ? ROLE_NEEDS[role] : allNeeds();
  const me = await currentRole(db);
  const missing = await missingGrants(db, me, needs);
  if (missing.length)
    logger.warn(
      `database role "${me}" lacks ${missing.length} grant(s) ${role ? `the ${functionTarget ?? ''} function` : 'the functions'} need(s): ` +
        `${missing.slice(0, SHOWN).join(', ')}${missing.length > SHOWN ? `, and ${missing.length - SHOWN} more` : ''}. ` +
        'Rerun infra/grants.sql as the owner of both schemas (terraform output -raw database_grants_sql); afterlife-plane doctor lists them all (docs/operations.md#check-grants)',
      { event: 'grants_missing', role: me, missing: missing.length },
    );
  return missing;
}

/** An instance serving every function (the local stack) needs what any of them needs. */
function allNeeds(): RoleNeeds {
  const all = FUNCTION_ROLES.map((r: FunctionRole) => ROLE_NEEDS[r]);
  const union = (lists: Array<Array<[string, string]>>) => [...new Map(lists.flat().map((w) => [w.join(' '), w] as const)).values()];
  return {
    dbosTables: [...new Set(all.flatMap((n) => n.dbosTables))],
    dbosWrites: union(all.map((n) => n.dbosWrites)),
    dbosSequences: all.some((n) => n.dbosSequences),
    afterlifeWrites: union(all.map((n) => n.afterlifeWrites)),
  };
}
