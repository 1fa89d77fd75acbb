import { type Db, ident, livenessHeldSql } from '../../../packages/executor/src/plane/index.js';

/**
 * Every application kits registered under in this database (alive or draining rows), with how many of those
 * kits hold their liveness lock right now: a registered kit whose lock is held by its own session is live,
 * whatever any plane thinks of it.
 */
export interface RegisteredApplication {
  applicationName: string;
  registered: number;
  live: number;
  /** Up to 5 executor IDs, live ones first. */
  examples: string[];
}

export async function registeredApplications(db: Db): Promise<RegisteredApplication[]> {
  const held = livenessHeldSql(db.afterlifeSchema, 'e.application_name', 'e.executor_id');
  const res = await db.query<{ app: string; registered: number; live: number; examples: string[] }>(
    `WITH r AS (
       SELECT e.application_name, e.executor_id, ${held} AS live
         FROM ${ident(db.afterlifeSchema)}.executors e WHERE e.state IN ('alive', 'draining')
     )
     SELECT application_name AS app, count(*)::int AS registered, count(*) FILTER (WHERE live)::int AS live,
            (array_agg(executor_id ORDER BY live DESC, executor_id))[1:5] AS examples
       FROM r GROUP BY 1 ORDER BY 1`,
    [],
    'doctor.registeredApplications',
  );
  return res.rows.map((r) => ({ applicationName: r.app, registered: r.registered, live: r.live, examples: r.examples }));
}
