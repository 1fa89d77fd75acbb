import { DbBusyError } from '../errors.js';

/**
 * A per-instance cap on concurrent database work. pg.Pool would queue excess callers until
 * `connectionTimeoutMillis` and then fail all of them at once; this fails the excess immediately (after
 * at most `maxWaitMs`) with a retryable error, so Pub/Sub redelivers it to a less busy moment or instance.
 */
export class DbBudget {
  private inUse = 0;
  private readonly waiters: Array<{ resolve: () => void; timer: NodeJS.Timeout }> = [];

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

  /**
   * `waitMs` overrides the budget's own bound for this caller (admission waits within its invocation's
   * budget); an aborted `signal` (the instance shutting down) ends the wait at once with the same error.
   */
  async acquire(waitMs = this.maxWaitMs, signal?: AbortSignal): Promise<() => void> {
    if (this.inUse < this.limit) {
      this.inUse += 1;
      return this.releaser();
    }
    if (waitMs <= 0 || this.waiters.length >= this.maxWaiters || signal?.aborted) {
      throw new DbBusyError(this.inUse, this.limit);
    }
    await new Promise<void>((resolve, reject) => {
      const give = () => {
        const i = this.waiters.indexOf(entry);
        if (i >= 0) this.waiters.splice(i, 1);
        clearTimeout(entry.timer);
        signal?.removeEventListener('abort', give);
        reject(new DbBusyError(this.inUse, this.limit));
      };
      const entry = {
        resolve: () => {
          signal?.removeEventListener('abort', give);
          resolve();
        },
        timer: setTimeout(give, waitMs),
      };
      signal?.addEventListener('abort', give, { once: true });
      this.waiters.push(entry);
    });
    return this.releaser();
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
