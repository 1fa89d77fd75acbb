import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * A death the recovery found contradicted (the heartbeat came back, or the guard rejected every row) was
 * no death: the timeline its recovery opened goes, unless another recovery of the same death joined it.
 */
export async function discardTimeline(db: Db, recoveryId: number): Promise<void> {
  await db.query(
    `DELETE FROM ${ident(db.afterlifeSchema)}.timelines
      WHERE first_recovery_id = $1 AND last_recovery_id = $1 AND closed_at IS NULL`,
    [recoveryId],
    'timelines.discard',
  );
}
