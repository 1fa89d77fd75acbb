import type { SignOfLife, TimelineStart } from '../db/queries/recoveries.js';
import type { DeathNotice } from '../../packages/executor/src/plane/index.js';

/**
 * A declared death's beginning, from its notice, for its timeline (docs/operations.md, "Recovery timelines").
 *
 * The cause of a death the reaper inferred (`heartbeat-lapsed`) is read off its evidence. A crash frees
 * the executor's liveness lock at once, so the reaper declares it a couple of beat intervals and two ticks
 * after its last beat (about a second at the defaults), while the beat is still in Redis. A host lost
 * behind a proxy keeps its session — and the lock — until the server's lease ends it
 * (AFTERLIFE_LIVENESS_LEASE_MS, 8 s by default), long after its last beat. So a liveness death declared
 * more than LOST_HOST_AFTER_MS after the last beat, or once the beat's key has expired (the lock outlived
 * the key's TTL), is `lost-host`, and earlier is `crash`. Deaths judged on the heartbeat alone cannot tell
 * the two apart (the key expires on its TTL either way) and read `crash`. An executor without the kit whose
 * sessions ended `vanished`: the plane cannot tell a crash from a SIGTERM or a lost host there. Notices the
 * executor sent say their own cause.
 */
export const LOST_HOST_AFTER_MS = 4_000;

export function timelineStart(notice: DeathNotice, seen?: SignOfLife): TimelineStart {
  return { cause: causeOf(notice), lastSignOfLife: lastSignOfLife(notice, seen), declaredAt: notice.detectedAt };
}

export function causeOf(notice: DeathNotice): TimelineStart['cause'] {
  switch (notice.reason) {
    case 'sigterm':
      return 'sigterm';
    case 'drained':
      return 'drain';
    case 'manual':
      return 'manual';
    case 'heartbeat-lapsed': {
      if (notice.evidence === 'sessions') return 'vanished';
      if (notice.evidence !== 'liveness') return 'crash';
      if (notice.staleBeatAt === undefined) return 'lost-host';
      const silentMs = Date.parse(notice.detectedAt) - Date.parse(notice.staleBeatAt);
      return silentMs > LOST_HOST_AFTER_MS ? 'lost-host' : 'crash';
    }
  }
}

/**
 * A notice the executor sent itself (SIGTERM, drained) was its last sign of life. Otherwise the last beat
 * the declaration saw, or what the reaper saw of an executor without the kit (its last session, its last
 * checkpoint), or none: the statement then takes the reaper's last sighting of the key, or the declaration
 * itself, and records which.
 */
function lastSignOfLife(notice: DeathNotice, seen: SignOfLife | undefined): SignOfLife | undefined {
  if (notice.reason === 'sigterm' || notice.reason === 'drained') return { at: notice.detectedAt, source: 'notice' };
  if (notice.staleBeatAt !== undefined) return { at: notice.staleBeatAt, source: 'heartbeat' };
  return seen;
}
