import { array, type Infer, integer, nullish, object, optional, string } from './parse.js';

/**
 * "Claim it now": what a recovery says, on commit, to a few live executors of the dead one's application and
 * version once it has re-enqueued their work (shared/dbos/recovery.ts sends it after the batch that moved
 * the rows committed, in a statement of its own, so a notice that cannot be sent never fails the move). Without it the work waits for the survivors' next
 * queue poll — DBOS polls every `polling_interval_sec`, 1 s by default, which was most of a recovery's time
 * after the death was declared (bench/HISTORY.md). It is a hint: a kit that hears it asks DBOS to
 * poll the named queues once, through DBOS's own claim (SKIP LOCKED, re-checked status), exactly as its next
 * scheduled poll would; nothing is claimed that the poll would not have claimed a moment later, and a lost,
 * forged or repeated notice costs at most one early poll per named queue, and a stream of any rate at most
 * the kit's poll budget (a burst of 20, then 2 polls a second over all its queues; executor/pollNow.ts,
 * docs/threat-model.md); a notice that does not name the kit is dropped before it is parsed.
 */
export function requeuedChannel(afterlifeSchema: string): string {
  return `${afterlifeSchema}_requeued`.slice(0, 63);
}

/**
 * How many live executors one recovery batch asks to claim now. One would do when it is idle; two keep the
 * nudge when one of them is busy, draining or wedged, and still spare the rest of the fleet a herd of polls
 * on the same rows (with no `LIMIT`, DBOS's first poll claims every ENQUEUED row of its version anyway).
 */
export const REQUEUED_NUDGE_TARGETS = 2;

/** At most this many queue names are carried (a NOTIFY payload is bounded at 8,000 bytes). */
export const REQUEUED_MAX_QUEUES = 20;

export const RequeuedNotice = object({
  applicationName: string({ min: 1 }),
  /** The version the moved rows are pinned to (null: rows pinned to none). */
  applicationVersion: nullish(string()),
  queues: array(string({ min: 1 }), { max: REQUEUED_MAX_QUEUES }),
  /** The executors asked; everyone else ignores the notice. */
  to: array(string({ min: 1 }), { max: REQUEUED_NUDGE_TARGETS }),
  /** Queues with re-enqueued work that `queues` leaves out (the payload's bound): they wait for their scheduled poll. */
  more: optional(integer({ min: 1 })),
});
export type RequeuedNotice = Infer<typeof RequeuedNotice>;

/**
 * Postgres refuses a NOTIFY payload of 8,000 bytes or more (`payload string too long`); the notice stays a
 * margin below it, counted in UTF-8 bytes as the server counts them.
 */
export const REQUEUED_PAYLOAD_MAX_BYTES = 7_900;

/**
 * The notice's payload, never over REQUEUED_PAYLOAD_MAX_BYTES: as many of the queue names (in order) as fit,
 * the rest of `queueCount` (the distinct queues with moved work; default: the names given) counted in `more`.
 * Undefined when not even the notice without queues fits (names that long cannot be asked about; the work
 * waits for its scheduled poll).
 */
export function requeuedPayload(n: {
  applicationName: string;
  applicationVersion: string | null;
  to: string[];
  queues: string[];
  queueCount?: number;
}): string | undefined {
  const to = n.to.slice(0, REQUEUED_NUDGE_TARGETS);
  const names = n.queues.slice(0, REQUEUED_MAX_QUEUES);
  const total = Math.max(n.queueCount ?? 0, n.queues.length);
  for (let count = names.length; count >= 0; count--) {
    const notice: RequeuedNotice = {
      applicationName: n.applicationName,
      applicationVersion: n.applicationVersion,
      queues: names.slice(0, count),
      to,
    };
    if (total > count) notice.more = total - count;
    const payload = JSON.stringify(notice);
    if (Buffer.byteLength(payload, 'utf8') <= REQUEUED_PAYLOAD_MAX_BYTES) return payload;
  }
  return undefined;
}
