import { DbBusyError } from '../errors.js';

/**
 * A per-instance cap on concurrent database work. pg.Pool would queue excess callers until
 * `connectionTimeoutMillis` and then fail all of them at once; this fails the excess immediately (after
 * at most `maxWaitMs`) with a retryable error, so Pub/Sub redelivers it to a less busy moment or instance.
 */
export class DbBudget {
  private inUse = 0;
  private readonly waiters: Array<{ resolve: () => void; reject: () => void; timer: NodeJS.Timeout }> = [];

  constructor(
    readonly limit: number,
    private readonly maxWaitMs = 50,
    private readonly maxWaiters = limit * 2,
  ) {}

  get active(): number {
    return this.inUse;
  }

  /** The number of callers waiting for a slot. */
  get queued(): number {
    return this.waiters.length;
  }

  /** `waitMs` overrides the budget's own bound for this caller (admission waits within its invocation's budget). */
  async acquire(waitMs = this.maxWaitMs): Promise<() => void> {
    if (this.inUse < this.limit) {
      this.inUse += 1;
      return this.releaser();
    }
    if (waitMs <= 0 || this.waiters.length >= this.maxWaiters) {
      throw new DbBusyError(this.inUse, this.limit);
    }
    await new Promise<void>((resolve, reject) => {
      const entry = {
        resolve,
        reject: () => reject(new DbBusyError(this.inUse, this.limit)),
        timer: setTimeout(() => {
          const i = this.waiters.indexOf(entry);
          if (i >= 0) this.waiters.splice(i, 1);
          entry.reject();
        }, waitMs),
      };
      this.waiters.push(entry);
    });
    return this.releaser();
  }

  /** Ends every wait now with DbBusyError (the instance shutting down: redeliveries go elsewhere). */
  rejectWaiting(): void {
    for (const w of this.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject();
    }
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next) {
        clearTimeout(next.timer);
        next.resolve(); // the slot passes straight to the waiter; inUse is unchanged
      } else {
        this.inUse -= 1;
      }
    };
  }
}
