import { type Db, ident } from '../../../packages/executor/src/plane/index.js';
import { figuresCte, type RawTimeline, TIMELINE_COLUMNS, type TimelineRow, timelineRow, TRACK_LIMIT } from './timelineFigures.js';

/**
 * Closes, in one conditional statement, the open timelines of an application that are over: their
 * recoveries are done (the last one completed) and every tracked moved workflow has started elsewhere, or
 * they moved nothing, or `boundMs` has passed since the declaration. At most `limit` open timelines are
 * examined, oldest first, skipping any another closer holds; each is closed once (`closed_at IS NULL` is
 * re-checked), and the closed rows come back to be logged.
 */
export async function closeTimelines(db: Db, applicationName: string, boundMs: number, limit: number): Promise<TimelineRow[]> {
  const res = await db.query<RawTimeline>(
    `WITH ${figuresCte(db, { where: 't.application_name = $1 AND t.closed_at IS NULL', limit: '$3', track: '$4', lock: true })}
     UPDATE ${ident(db.afterlifeSchema)}.timelines t
        SET first_reenqueued_at = f.first_at, last_reenqueued_at = f.last_at, first_step_elsewhere_at = f.first_step_at,
            all_started_at = f.all_at, reenqueued = f.reenqueued, tracked = f.tracked, started = f.started, closed_at = now(),
            closed_because = CASE WHEN f.done AND f.all_at IS NOT NULL THEN 'all-started'
                                  WHEN f.done AND f.reenqueued = 0 THEN 'nothing-moved' ELSE 'bound' END
       FROM fig f
      WHERE t.id = f.id AND t.closed_at IS NULL
        AND ((f.done AND (f.all_at IS NOT NULL OR f.reenqueued = 0))
             OR t.declared_at < now() - make_interval(secs => $2::bigint / 1000.0))
      RETURNING ${TIMELINE_COLUMNS}`,
    [applicationName, boundMs, limit, TRACK_LIMIT],
    'timelines.close',
  );
  return res.rows.map(timelineRow);
}
