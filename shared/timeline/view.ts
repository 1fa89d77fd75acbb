import type { TimelineRow } from '../db/queries/timelineFigures.js';

/**
 * A timeline as the operator sees it (`afterlife timeline --json`, the `recovery_timeline` event): the
 * stages as ISO strings, and the gaps the SLO is about in ms. "Death" is the last sign of life the
 * evidence gave (the last beat, or the executor's own notice), else the declaration.
 */
export interface TimelineView {
  timelineId: number;
  executorId: string;
  incarnation: string | null;
  cause: TimelineRow['cause'];
  /** The death's recoveries (audit numbers), first and last. */
  recoveryIds: { first: number; last: number };
  lastSignOfLifeAt: string | null;
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
  const death = (t.lastSignOfLifeAt ?? t.declaredAt).getTime();
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  const gap = (d: Date | null) => (d ? d.getTime() - death : null);
  return {
    timelineId: t.id,
    executorId: t.executorId,
    incarnation: t.incarnation,
    cause: t.cause,
    recoveryIds: { first: t.firstRecoveryId, last: t.lastRecoveryId },
    lastSignOfLifeAt: iso(t.lastSignOfLifeAt),
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
