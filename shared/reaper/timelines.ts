import { closeTimelines } from '../db/queries/closeTimelines.js';
import { timelineView } from '../timeline/view.js';
import { type ReaperDeps, skip, type Skipped, type TickContext } from './types.js';

/**
 * The reaper closes deaths' timelines (shared/timeline), in its once-a-second sweep: one statement that
 * examines at most CLOSE_LIMIT open timelines (an indexed probe that finds none when nobody died), closes
 * those whose moved work has all started elsewhere, or that moved nothing, or whose bound passed, and logs
 * each closed one once as `recovery_timeline`. The recovery itself only opened the row (in the statement
 * that starts its audit row), so none of this is on the recovery's path: the figures come from DBOS's own
 * step records, whenever they are read.
 */
export const TIMELINE_BOUND_MS = 10 * 60_000;
export const CLOSE_LIMIT = 20;

export interface TimelinePassResult {
  closed: number;
  /** Closed by the bound, with moved work not all started (a version nothing runs, a queue held back). */
  bounded: number;
}

export async function timelinePass(deps: ReaperDeps, ctx: TickContext): Promise<TimelinePassResult | Skipped> {
  // A dry run writes nothing; closing is a write (and the line it logs says the death is over).
  if (ctx.dryRun) return skip('dry run');
  const closed = await closeTimelines(deps.db, deps.config.applicationName, TIMELINE_BOUND_MS, CLOSE_LIMIT);
  let bounded = 0;
  for (const row of closed) {
    const v = timelineView(row);
    // Stages not reached are left out rather than null, so a metric's `field:*` filter skips them.
    const fields = { event: 'recovery_timeline', ...Object.fromEntries(Object.entries(v).filter(([, x]) => x !== null)) };
    if (v.closedBecause !== 'bound') deps.logger.info(CLOSED_BECAUSE[v.closedBecause ?? 'all-started'], fields);
    else {
      bounded += 1;
      deps.logger.warn(CLOSED_BECAUSE.bound, fields);
    }
  }
  return { closed: closed.length, bounded };
}

const CLOSED_BECAUSE = {
  'all-started': "recovery timeline: the dead executor's moved work has all started elsewhere",
  'nothing-moved': 'recovery timeline: the dead executor left nothing to move',
  bound: `recovery timeline closed by its bound (${TIMELINE_BOUND_MS / 60_000} min): moved work not all seen starting elsewhere`,
} as const;
