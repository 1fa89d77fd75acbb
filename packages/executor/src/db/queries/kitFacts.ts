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
  /** Whether recoveries may ask it to claim their work now (contract/requeued.ts); they choose among those that can. */
  pollsOnRequest: boolean;
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

/**
 * A refusal to attach (migration 0016's kit_refusals), so doctor can name a kit that exited without
 * registering. Drops the application's refusals older than 7 days in the same statement (a crash-looping
 * kit adds one a start).
 */
export async function recordKitRefusal(
  db: Db,
  r: { applicationName: string; executorId: string; incarnation: string; reason: string; detail: string },
): Promise<void> {
  const t = `${ident(db.afterlifeSchema)}.kit_refusals`;
  await db.query(
    `WITH old AS (DELETE FROM ${t} WHERE application_name = $1 AND refused_at < now() - interval '7 days')
     INSERT INTO ${t} (application_name, executor_id, incarnation, reason, detail)
     VALUES ($1, $2, $3, left($4, 100), left($5, 2000)) ON CONFLICT DO NOTHING`,
    [r.applicationName, r.executorId, r.incarnation, r.reason, r.detail],
    'kitRefusals.record',
  );
}
