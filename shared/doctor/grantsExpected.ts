/**
 * What each function's role needs, as infra/grants.sql grants it (docs/operations.md#deploying-to-google-cloud,
 * step 4): doctor checks every role against it, and each function checks its own role at start
 * (shared/doctor/ownGrants.ts). test/integration/db/grantsMatrix.test.ts proves grants.sql grants exactly this.
 * @module
 */

export type FunctionRole = 'executor_death' | 'reaper' | 'drain';
export const FUNCTION_ROLES: FunctionRole[] = ['executor_death', 'reaper', 'drain'];

const I = 'INSERT';
const U = 'UPDATE';
const D = 'DELETE';
const pairs = (tables: string[], privs: string[]): Array<[string, string]> =>
  tables.flatMap((t) => privs.map((p): [string, string] => [t, p]));

export interface RoleNeeds {
  /** On every table of DBOS's schema, including tables DBOS (or the app's data source) creates later. */
  dbosTables: string[];
  /** DBOS's tables that need more, per table (those this DBOS version has). */
  dbosWrites: Array<[string, string]>;
  dbosSequences: boolean;
  /** afterlife's writes, per table; every role reads every afterlife table. */
  afterlifeWrites: Array<[string, string]>;
}

export const ROLE_NEEDS: Record<FunctionRole, RoleNeeds> = {
  // executorDeath deletes no workflow: DELETE only where a rewind in place removes history.
  executor_death: {
    dbosTables: ['SELECT', I, U],
    dbosWrites: pairs(
      ['operation_outputs', 'workflow_events', 'workflow_events_history', 'streams', 'notifications', 'workflow_output'],
      [D],
    ),
    dbosSequences: true,
    afterlifeWrites: [
      ...pairs(['executors', 'recoveries', 'recovery_batches', 'dead_letters', 'rewinds'], [I, U]),
      ...pairs(['forks'], [I, U, D]),
    ],
  },
  reaper: {
    dbosTables: ['SELECT', I, U, D],
    dbosWrites: [],
    dbosSequences: true,
    afterlifeWrites: [
      ...pairs(
        [
          'executors',
          'recoveries',
          'recovery_batches',
          'leases',
          'executor_observations',
          'stuck_workflows',
          'forks',
          'dead_letters',
          'rewinds',
        ],
        [I, U, D],
      ),
      ['drain_requests', D],
      ...pairs(['retention_state', 'redis_witness'], [I, U]),
    ],
  },
  drain: { dbosTables: ['SELECT'], dbosWrites: [], dbosSequences: false, afterlifeWrites: [['drain_requests', I]] },
};

/** The function an instance serves (functions-framework's FUNCTION_TARGET), whose needs it checks at start. */
export function roleOfTarget(target: string | undefined): FunctionRole | undefined {
  return target === 'executorDeath' ? 'executor_death' : target === 'reaper' || target === 'drain' ? target : undefined;
}
