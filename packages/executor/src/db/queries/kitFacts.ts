import { ident } from '../../contract/identifier.js';
import type { Db } from '../pool.js';

/** What a kit says about itself (migration 0016): read by the plane's doctor. */
export interface KitFacts {
  incarnation: string;
  kitVersion: string;
  /** The DBOS the app launched, from its package.json; undefined when it could not be read. */
  dbosVersion: string | undefined;
  /** idle_session_timeout as the liveness session reports it after the kit set it; undefined without a lock. */
  livenessLeaseMs: number | undefined;
}

/**
 * Records this incarnation's facts on its registry row (only while the row is still this incarnation's).
 * Returns false when the row is another incarnation's or gone.
 */
export async function recordKitFacts(db: Db, e: { applicationName: string; executorId: string; facts: KitFacts }): Promise<boolean> {
  const res = await db.query(
    `UPDATE ${ident(db.afterlifeSchema)}.executors
        SET kit_facts = $4::jsonb || jsonb_build_object('recordedAt', now())
      WHERE application_name = $1 AND executor_id = $2 AND incarnation = $3`,
    [e.applicationName, e.executorId, e.facts.incarnation, JSON.stringify(e.facts)],
    'executors.recordKitFacts',
  );
  return (res.rowCount ?? 0) > 0;
}
