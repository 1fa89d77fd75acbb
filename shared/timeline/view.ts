import type { TimelineRow } from '../db/queries/timelineFigures.js';

/**
 * A timeline as the operator sees it (`afterlife-plane timeline --json`, the `recovery_timeline` event): the
 * stages as ISO strings, and the gaps the SLO is about in ms. "Death" is the last sign of life the plane
 * had (the executor's own notice, its last beat, its last session or checkpoint), else the declaration, and
 * the view says which.
 */
export interface TimelineView {
  timelineId: number;
  executorId: string;
  incarnation: string | null;
  cause: TimelineRow['cause'];
  /** The death's recoveries (audit numbers), first and last. */
  recoveryIds: { first: number; last: number };
  lastSignOfLifeAt: string | null;
  /** What the start is: the executor's notice, its last beat, session or checkpoint, or only the declaration. */
  lastSignOfLifeSource: TimelineRow['lastSignOfLifeSource'];
  declaredAt: string;
  noticeAt: string | null;
  firstReenqueuedAt: string | null;
  lastReenqueuedAt: string | null;
  firstStepElsewhereAt: string | null;
  allStartedAt: string | null;
  counts: { recoveries: number; reenqueued: number; tracked: number; started: number };
  deathToDeclaredMs: number;
  deathToReenqueuedMs: number | null;
  deathToFirstStepMs: number | null;
  deathToAllStartedMs: number | null;
  /** Open: its work has not all started yet; figures as of now. */
  state: 'open' | 'closed';
  closedAt: string | null;
  closedBecause: TimelineRow['closedBecause'];
}

export function timelineView(t: TimelineRow): TimelineView {
  // Never after the declaration, so no gap is negative whatever the executors' clocks say.
  const death = Math.min((t.lastSignOfLifeAt ?? t.declaredAt).getTime(), t.declaredAt.getTime());
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  // Stages are stamped by different clocks (the executor's, the reaper's, the database's): a few ms of skew
  // must not make a stage precede the death it follows, nor reach the SLO's distribution as a negative.
  const gap = (d: Date | null) => (d ? Math.max(0, d.getTime() - death) : null);
  return {
    timelineId: t.id,
    executorId: t.executorId,
    incarnation: t.incarnation,
    cause: t.cause,
    recoveryIds: { first: t.firstRecoveryId, last: t.lastRecoveryId },
    lastSignOfLifeAt: iso(t.lastSignOfLifeAt),
    lastSignOfLifeSource: t.lastSignOfLifeSource ?? (t.lastSignOfLifeAt ? null : 'declaration'),
    declaredAt: t.declaredAt.toISOString(),
    noticeAt: iso(t.noticeAt),
    firstReenqueuedAt: iso(t.firstReenqueuedAt),
    lastReenqueuedAt: iso(t.lastReenqueuedAt),
    firstStepElsewhereAt: iso(t.firstStepElsewhereAt),
    allStartedAt: iso(t.allStartedAt),
    counts: { recoveries: t.recoveries, reenqueued: t.reenqueued, tracked: t.tracked, started: t.started },
    deathToDeclaredMs: t.declaredAt.getTime() - death,
    deathToReenqueuedMs: gap(t.firstReenqueuedAt),
    deathToFirstStepMs: gap(t.firstStepElsewhereAt),
    deathToAllStartedMs: gap(t.allStartedAt),
    state: t.closedAt ? 'closed' : 'open',
    closedAt: iso(t.closedAt),
    closedBecause: t.closedBecause,
  };
}
