import { type Db, ident } from '../../../packages/executor/src/plane/index.js';
import { figuresCte, type RawTimeline, TIMELINE_COLUMNS, type TimelineRow, timelineRow, TRACK_LIMIT } from './timelineFigures.js';

/**
 * One death's timeline, for `afterlife-plane timeline`: the newest of an executor's, or the one a recovery
 * (its audit number) belongs to. An open timeline carries its figures as of now; a closed one, as closed.
 */
export async function readTimeline(
  db: Db,
  applicationName: string,
  of: { executorId: string } | { recoveryId: number },
): Promise<TimelineRow | undefined> {
  const a = ident(db.afterlifeSchema);
  const where =
    'executorId' in of
      ? `t.application_name = $1 AND t.id = (SELECT max(x.id) FROM ${a}.timelines x WHERE x.application_name = $1 AND x.executor_id = $2::text)`
      : `t.application_name = $1 AND EXISTS (
           SELECT 1 FROM ${a}.recoveries r WHERE r.id = $2::text::bigint AND r.application_name = $1 AND r.executor_id = t.executor_id
              AND COALESCE(r.incarnation, '') = t.incarnation AND r.id BETWEEN t.first_recovery_id AND t.last_recovery_id)`;
  const res = await db.query<RawTimeline>(
    `WITH ${figuresCte(db, { where, limit: '1', track: '$3' })}
     SELECT ${TIMELINE_COLUMNS} FROM pick t JOIN fig f ON f.id = t.id`,
    [applicationName, 'executorId' in of ? of.executorId : String(of.recoveryId), TRACK_LIMIT],
    'timelines.read',
  );
  const row = res.rows[0];
  return row ? timelineRow(row) : undefined;
}
