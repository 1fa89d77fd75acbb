import { findDrainRequest, type DrainRequest } from '../db/queries/drainRequests.js';
import type { Db } from '../db/pool.js';
import { pendingByVersion } from '../dbos/pendingByVersion.js';
import type { Logger } from '../log.js';
import { guarded } from './guarded.js';
import type { KitTrouble } from './throttle.js';

/**
 * The kit's Postgres poll, on its own timer so a slow database never delays a beat: a drain request
 * addressed to this executor or its version (the drain function writes them), and — only when DBOS's
 * in-process count is unreachable — the in-flight count from PENDING rows. It runs once at attach, so an
 * executor of a version being drained never dequeues before it has looked.
 */
export const DRAIN_POLL_MS = 1_000;
/**
 * The poll's cadence while the kit's liveness session listens on the drain channel (a drain request is
 * announced there and polled for at once): a backstop for a hint lost while the session was re-made. It
 * bounds how late such a drain starts; the per-executor statements it costs are the fleet's cost (5 s: 0.2 a
 * second instead of 1).
 */
export const DRAIN_BACKSTOP_POLL_MS = 5_000;

export interface DrainPollOptions {
  db: Db;
  applicationName: string;
  executorId: string;
  applicationVersion: string;
  logger: Logger;
  /** Whether to look for drain requests now (false once draining). */
  alive: () => boolean;
  /** Whether DBOS's own running count is unreachable, so the fallback count is needed. */
  needsCount: () => boolean;
  onCount: (n: number) => void;
  onRequest: (req: DrainRequest) => void;
  everyMs?: number;
  /** Failures are reported through it (once a minute), not logged per poll. */
  trouble?: KitTrouble;
}

export class DrainPoller {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly o: DrainPollOptions) {}

  async start(): Promise<void> {
    await this.poll();
    this.timer = setInterval(() => this.pollNow(), this.o.everyMs ?? DRAIN_POLL_MS);
  }

  /** A poll now (a hint on the drain channel, or the timer); a poll still running is not started again. */
  pollNow(): void {
    if (this.stopped) return;
    this.running ??= this.poll().finally(() => (this.running = undefined));
  }

  private async poll(): Promise<void> {
    const o = this.o;
    if (this.stopped) return;
    if (o.needsCount()) {
      const pending = await guarded(
        o.logger,
        'count in-flight workflows',
        () => pendingByVersion(o.db, o.applicationName, o.executorId),
        undefined,
        o.trouble,
      );
      if (pending) o.onCount(pending.reduce((n, p) => n + p.count, 0));
    }
    if (this.stopped || !o.alive()) return;
    const req = await guarded(
      o.logger,
      'poll drain requests',
      () =>
        findDrainRequest(o.db, { applicationName: o.applicationName, executorId: o.executorId, applicationVersion: o.applicationVersion }),
      undefined,
      o.trouble,
    );
    if (req && o.alive() && !this.stopped) {
      o.logger.notice('drain requested', { requestId: req.id, budgetMs: req.budgetMs });
      o.onRequest(req);
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
  }
}
