import type { Db } from '../db/pool.js';
import { sessionPresent } from '../db/queries/executors.js';
import { clearSuperseded, type PendingUnderId, readPendingUnderId, reenqueueSuperseded } from '../dbos/superseded.js';
import type { Logger } from '../log.js';
import type { KitTrouble } from './throttle.js';
import { SUPERSEDED_LOOK_EVERY_MS, SUPERSEDED_SETTLE_MS } from './timeouts.js';

/**
 * The superseded sweep. When this process registered, the registry said another process with
 * this executor ID was live (a duplicated env, an overlapping restart): this one superseded it, and its kit
 * exits. DBOS's launch recovery here re-enqueued that process's PENDING work, but the other process, live
 * until its kit saw the registry, may have claimed some of it back (DBOS polls every second, and the kit
 * attaches after launch). Those rows are PENDING under an ID this process holds alive, and DBOS recovers an
 * ID only at launch: nothing would ever run them again, and the reaper, which sees the ID alive, must not
 * touch them.
 *
 * Which rows are the other process's? DBOS's rows carry the executor ID, never the process. Only this
 * process knows what it runs (DBOS's running map): a PENDING row under the ID that is not in it, with the
 * same ownership token on two readings `CONFIRM_MS` apart, is not this process's (a claim of ours enters the
 * map within milliseconds, and any new claim changes the token). Claims made after this process held the
 * ID's lock are its own (the other one is gone by then), so only earlier claims and direct starts are read.
 * Nothing is moved before this process holds the ID's liveness lock: the lock is one, so holding it means
 * the superseded process's lease is gone — it exited, or is frozen past its lease, as for any death.
 *
 * Such a row is re-enqueued with DBOS's own recovery statement, which re-checks the token, the lock and the
 * registry (dbos/superseded.ts); DBOS's owner check still decides who records an outcome. The sweep
 * runs every second until a reading finds nothing that is not ours, then clears the registry's record.
 */
export const SWEEP_EVERY_MS = 1_000;
/** Two readings at least this far apart, same token, never in the running map: not this process's. */
export const CONFIRM_MS = 3_000;

export interface SupersededSweepOptions {
  db: Db;
  applicationName: string;
  executorId: string;
  incarnation: string;
  /** The incarnation this process took the registry row from while it was live. */
  superseded: string;
  log: Logger;
  trouble: KitTrouble;
  /** Whether this process holds the ID's liveness lock now. */
  held: () => boolean;
  /** False once the kit drains, closes or is fenced: a hand-over or the plane then covers what is PENDING. */
  active: () => boolean;
  /** What DBOS runs in this process (undefined: its internals moved; the sweep cannot tell and says so). */
  runningIds: () => ReadonlySet<string> | undefined;
  everyMs?: number;
  confirmMs?: number;
  now?: () => number;
}

interface Seen {
  ownerXid: string | null;
  applicationVersion: string | null;
  since: number;
}

export class SupersededSweep {
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private done = false;
  private seen = new Map<string, Seen>();
  /** The database clock at the first reading made while holding the lock: later claims are this process's. */
  private claimedByMs: number | undefined;
  private movedTotal = 0;

  constructor(private readonly o: SupersededSweepOptions) {}

  start(): void {
    if (this.o.runningIds() === undefined) {
      this.finishUnknown();
      return;
    }
    this.timer = setInterval(() => void this.tick(), this.o.everyMs ?? SWEEP_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One reading, and the re-enqueue of what two readings agree is not this process's. */
  async tick(): Promise<void> {
    if (this.busy || this.done || !this.o.active() || !this.o.held()) return;
    this.busy = true;
    try {
      await this.sweep();
      this.o.trouble.ok('superseded sweep');
    } catch (err) {
      this.o.trouble.report('superseded sweep', err);
    } finally {
      this.busy = false;
    }
  }

  private async sweep(): Promise<void> {
    const o = this.o;
    const who = { applicationName: o.applicationName, executorId: o.executorId };
    const reading = await readPendingUnderId(o.db, { ...who, claimedByMs: this.claimedByMs });
    this.claimedByMs ??= reading.nowMs;
    // Read after the rows: a claim of ours that committed before the reading is in the map by now, or by
    // the next reading (it enters the map a few statements after its commit).
    const ours = o.runningIds();
    if (ours === undefined) return this.finishUnknown();
    const now = (o.now ?? Date.now)();
    const next = new Map<string, Seen>();
    const ripe: PendingUnderId[] = [];
    for (const r of reading.rows) {
      if (ours.has(r.workflowId)) continue;
      const prev = this.seen.get(r.workflowId);
      if (prev && prev.ownerXid === r.ownerXid && prev.applicationVersion === r.applicationVersion) {
        next.set(r.workflowId, prev);
        if (now - prev.since >= (o.confirmMs ?? CONFIRM_MS)) ripe.push(r);
      } else {
        next.set(r.workflowId, { ownerXid: r.ownerXid, applicationVersion: r.applicationVersion, since: now });
      }
    }
    this.seen = next;
    if (ripe.length > 0) {
      const stillOurs = o.runningIds() ?? ours;
      const moved = await reenqueueSuperseded(o.db, {
        ...who,
        incarnation: o.incarnation,
        claimedByMs: this.claimedByMs,
        rows: ripe.filter((r) => !stillOurs.has(r.workflowId)),
      });
      for (const id of moved) this.seen.delete(id);
      if (moved.length > 0) {
        this.movedTotal += moved.length;
        o.log.notice('re-enqueued the PENDING work the superseded process left under this executor ID', {
          superseded: o.superseded,
          moved: moved.length,
          workflowIds: moved.slice(0, 20),
          event: 'superseded_work_recovered',
        });
      }
    }
    if (this.seen.size > 0) return;
    await clearSuperseded(o.db, { ...who, incarnation: o.incarnation });
    this.done = true;
    this.stop();
    o.log.info('nothing of the superseded process is left PENDING under this executor ID', {
      superseded: o.superseded,
      moved: this.movedTotal,
      event: 'superseded_sweep_done',
    });
  }

  /** DBOS's running map is not readable: this process cannot tell its own work from the other's. */
  private finishUnknown(): void {
    this.done = true;
    this.stop();
    this.o.log.warn(
      "a live process with this executor ID was superseded, and this DBOS release does not let the kit read which workflows this process runs: whatever the other process claimed after this one's launch stays PENDING until this executor ID is launched again (restart this process once the other has exited)",
      { superseded: this.o.superseded, event: 'superseded_work_unknown' },
    );
  }
}

/**
 * Says what taking the ID over meant. The registry said the previous incarnation was alive, but a process
 * restarted a moment after a SIGKILL finds its predecessor undeclared, its session still being torn down:
 * that one is no live process. So the previous liveness session is watched for a moment: gone within
 * SUPERSEDED_SETTLE_MS is a NOTICE; still there after it, a WARNING (a second live process with this ID).
 */
export async function tellSuperseded(
  o: { db: Db; log: Logger; connectionsOpen: () => boolean },
  superseded: string,
  session: { pid: number; backendStart: string } | null,
): Promise<void> {
  const t0 = Date.now();
  let present: boolean | undefined = session === null ? undefined : true;
  try {
    while (session !== null && present === true && Date.now() - t0 < SUPERSEDED_SETTLE_MS && o.connectionsOpen()) {
      await new Promise((r) => setTimeout(r, SUPERSEDED_LOOK_EVERY_MS));
      present = await sessionPresent(o.db, session);
    }
  } catch {
    present = undefined;
  }
  if (present === false) {
    o.log.notice(
      `took this executor ID over from its previous process, whose liveness session ended ${Date.now() - t0} ms after this one registered (it had stopped, or stopped on seeing this one, before the plane declared it); its leftover PENDING work, if any, is re-enqueued`,
      { superseded, event: 'executor_superseded_other' },
    );
    return;
  }
  o.log.warn(
    present === true
      ? `another process with this executor ID is still live ${SUPERSEDED_SETTLE_MS} ms after this one registered (a duplicated executor ID, or an overlapping restart): it is superseded and its kit exits; its leftover PENDING work is re-enqueued once its lease is gone`
      : 'the registry said another process with this executor ID was alive, and its session cannot be seen from here: it is superseded and its kit exits if it is still running; its leftover PENDING work is re-enqueued once its lease is gone',
    { superseded, event: 'executor_superseded_other' },
  );
}
