import type { Budget } from '../lifecycle/deadline.js';
import { DbBudget, DbBusyError } from '../../packages/executor/src/plane/index.js';

/**
 * Deliveries are admitted whole, before any work: at most as many recoveries run at once as the instance
 * has database slots. Without this the statement budget would turn a delivery away halfway through, after
 * it had taken the lock and opened its audit row, and the redelivery would redo its work.
 *
 * A delivery beyond the slots waits in line (FIFO, holding no connection and no lock) for at most half of
 * its invocation's remaining budget, so the one admitted last still has the other half to work; only then
 * does it answer "retry later". Bouncing at once made a burst of deaths a series of redelivery rounds
 * (200 notices on 3 slots: 56–59 rounds, 65 s at one-second redelivery, minutes under Pub/Sub's
 * exponential backoff); waiting serves them all on first delivery (executorDeath/concurrency.test.ts,
 * bench/burst.ts).
 */
export class Admission {
  private readonly slots: DbBudget;

  /**
   * `maxQueued` bounds the line (a delivery beyond it is answered "retry later" at once); `signal` (the
   * instance's shutdown) ends every wait at once, so redeliveries go to an instance that is staying.
   */
  constructor(
    readonly limit: number,
    opts: { maxQueued?: number; signal?: AbortSignal } = {},
  ) {
    this.slots = new DbBudget(limit, 0, opts.maxQueued ?? limit * 100);
    this.signal = opts.signal;
    opts.signal?.addEventListener('abort', () => this.slots.rejectWaiting(), { once: true });
  }

  private readonly signal: AbortSignal | undefined;

  get active(): number {
    return this.slots.active;
  }

  get queued(): number {
    return this.slots.queued;
  }

  /** Resolves to the slot's release; rejects with DbBusyError once half the remaining budget has passed. */
  async enter(budget: Budget): Promise<() => void> {
    if (this.signal?.aborted) throw new DbBusyError(this.slots.active, this.limit);
    return this.slots.acquire(Math.max(0, Math.floor(budget.remaining() / 2)));
  }
}
