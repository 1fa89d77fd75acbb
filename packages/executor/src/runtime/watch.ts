import { GUARD_TICK_WITHIN_MS } from '../contract/guard.js';
import type { Db } from '../db/pool.js';
import { planeTicks, type PlaneTick } from '../db/queries/guards.js';
import type { Logger } from '../log.js';
import type { KitTrouble } from './throttle.js';

/**
 * Whether a plane guards this kit's application in its database: a kit registered under a name
 * no plane guards has its deaths left unrecovered, and before this nothing said so on either side. The
 * kit reads the reapers' lease rows (contract/guard.ts) every `WATCH_CHECK_EVERY_MS` on its own small pool
 * (one statement; no connection is held between checks) and, while no plane guards its application, logs
 * a WARNING once the grace is over and then once a minute, naming its application, the applications the
 * planes here do guard, and the setting to change. Becoming watched later is said once, at INFO.
 */
export const WATCH_CHECK_EVERY_MS = 5_000;
/** Long enough for a plane started beside the app (`npm start` adopting the first kit's name) to tick. */
export const WATCH_GRACE_MS = 10_000;
export const UNWATCHED_WARN_EVERY_MS = 60_000;

/** What the kit knows about being watched (`kit.watch`). */
export interface WatchStatus {
  /** A plane ticked for this application within GUARD_TICK_WITHIN_MS; undefined until the database answered. */
  readonly watched: boolean | undefined;
  /** The applications the planes in this database guard now. */
  readonly guardedApplications: readonly string[];
  /** When the database last answered the question. */
  readonly checkedAt: Date | undefined;
}

export interface WatchOptions {
  db: Db;
  applicationName: string;
  log: Logger;
  trouble: KitTrouble;
  /** False once the kit is closing: no more checks. */
  active: () => boolean;
}

export class Watch {
  private status: WatchStatus = { watched: undefined, guardedApplications: [], checkedAt: undefined };
  private readonly since = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private checking = false;
  private warnedAt: number | undefined;
  private unwatchedSeen = false;

  constructor(private readonly o: WatchOptions) {}

  get current(): WatchStatus {
    return this.status;
  }

  /** The first check (the caller bounds it), then one every WATCH_CHECK_EVERY_MS. */
  async start(): Promise<void> {
    this.timer = setInterval(() => void this.check(), WATCH_CHECK_EVERY_MS);
    this.timer.unref();
    await this.check();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private async check(): Promise<void> {
    if (this.checking || !this.o.active()) return;
    this.checking = true;
    try {
      this.judge(await planeTicks(this.o.db));
      this.o.trouble.ok('watch check');
    } catch (err) {
      this.o.trouble.report('watch check', err, { what: 'whether a plane guards this application' });
    } finally {
      this.checking = false;
    }
  }

  private judge(ticks: PlaneTick[]): void {
    const guarded = ticks.filter((t) => t.sinceTickMs <= GUARD_TICK_WITHIN_MS).map((t) => t.applicationName);
    const app = this.o.applicationName;
    const watched = guarded.includes(app);
    this.status = { watched, guardedApplications: guarded, checkedAt: new Date() };
    if (watched) {
      if (this.unwatchedSeen) this.o.log.info(`a plane now guards application "${app}" in this database`, { event: 'kit_watched' });
      this.unwatchedSeen = false;
      this.warnedAt = undefined;
      return;
    }
    this.unwatchedSeen = true;
    const now = Date.now();
    if (now - this.since < WATCH_GRACE_MS) return;
    if (this.warnedAt !== undefined && now - this.warnedAt < UNWATCHED_WARN_EVERY_MS) return;
    this.warnedAt = now;
    this.warn(guarded, ticks);
  }

  private warn(guarded: string[], ticks: PlaneTick[]): void {
    const app = this.o.applicationName;
    const last = ticks[0];
    const planes = guarded.length
      ? `the plane(s) in this database guard ${guarded.map((g) => `"${g}"`).join(', ')}`
      : last
        ? `no plane ticks in this database (the last one guarded "${last.applicationName}", ${Math.round(last.sinceTickMs / 1000)} s ago)`
        : 'no plane has ever ticked in this database';
    const fix =
      `set DBOS_APPLICATION_NAME=${app} (or DBOS_APP_NAME) on the plane for this database, so it guards the name this ` +
      `app registers under (DBOS's application name)` +
      (guarded.length === 1 ? `; or name this app "${guarded[0]}" in its DBOS configuration if that plane is meant for it` : '');
    this.o.log.warn(`no plane guards application "${app}": ${planes}. Deaths of this process are NOT recovered. Fix: ${fix}`, {
      event: 'kit_unwatched',
      guardedApplications: guarded,
      fix,
      repeatsEveryMs: UNWATCHED_WARN_EVERY_MS,
    });
  }
}
