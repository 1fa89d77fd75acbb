import { releaseLease, renewLease, sinceLastTick, tryAcquireLease } from '../db/queries/leases.js';
import type { Db, Logger } from '../../packages/executor/src/plane/index.js';

/**
 * The reaper's single-flight lease, as seen by one invocation. It is a few ticks long, renewed after every
 * tick, and named after the instance (not the invocation), so:
 *   - a database blip that fails a renew is retried, and the same instance carries on once it answers —
 *     even if the lease lapsed meanwhile, as long as nobody else took it;
 *   - a dead holder is replaced within a lease by a standby invocation polling for it;
 *   - a release that fails is retried while the budget lasts (else the lease just lapses, a few ticks on).
 * Overlap is harmless by construction (every write re-checks its premise); the lease only saves work.
 * Two invocations in one process share the name, so the process admits one holder at a time itself.
 */
const active = new Set<string>();

export type RenewOutcome = 'renewed' | 'lost' | 'error';

export class ReaperLease {
  /** Local time until which this invocation may act as the holder (a renew's start + the lease). */
  validUntil = 0;
  private inProcess = false;

  readonly name: string;
  readonly holder: string;
  private readonly leaseMs: number;
  private readonly clock: () => number;
  private readonly log: Logger;

  constructor(
    private readonly db: Db,
    o: { name: string; holder: string; leaseMs: number; clock: () => number; log: Logger },
  ) {
    this.name = o.name;
    this.holder = o.holder;
    this.leaseMs = o.leaseMs;
    this.clock = o.clock;
    this.log = o.log;
  }

  get held(): boolean {
    return this.inProcess && this.clock() < this.validUntil;
  }

  /** One attempt; errors read as "not now". Returns the gap since the last tick when it takes the lease. */
  async tryAcquire(): Promise<{ acquired: boolean; sinceLastTickMs?: number }> {
    const key = `${this.db.afterlifeSchema}:${this.name}`;
    if (!this.inProcess) {
      if (active.has(key)) return { acquired: false };
      active.add(key);
      this.inProcess = true;
    }
    const from = this.clock();
    try {
      if (!(await tryAcquireLease(this.db, this.name, this.holder, this.leaseMs))) {
        this.leaveProcess();
        return { acquired: false };
      }
      this.validUntil = from + this.leaseMs;
      const since = await sinceLastTick(this.db, this.name).catch(() => undefined);
      return { acquired: true, ...(since !== undefined ? { sinceLastTickMs: since } : {}) };
    } catch (err) {
      this.log.debug('reaper lease acquire failed; retrying', { err });
      this.leaveProcess();
      return { acquired: false };
    }
  }

  /** Extends the lease and records the tick; a failure while the lease is still ours is 'error', retried by the caller. */
  async renew(ticked: boolean): Promise<RenewOutcome> {
    const from = this.clock();
    try {
      if (!(await renewLease(this.db, this.name, this.holder, this.leaseMs, ticked))) {
        this.validUntil = 0;
        this.leaveProcess();
        return 'lost';
      }
      this.validUntil = from + this.leaseMs;
      return 'renewed';
    } catch (err) {
      this.log.warn('reaper lease renew failed; retrying (the lease is ours until it lapses)', {
        err,
        validForMs: Math.max(0, this.validUntil - this.clock()),
      });
      return 'error';
    }
  }

  /** Gives the lease back, retrying until `deadline`, so the next invocation need not wait for it to lapse. */
  async release(deadline: number): Promise<void> {
    if (!this.inProcess) return;
    for (let attempt = 1; ; attempt++) {
      try {
        await releaseLease(this.db, this.name, this.holder);
        break;
      } catch (err) {
        const wait = Math.min(500, 50 * 2 ** attempt);
        if (this.clock() + wait >= deadline) {
          this.log.warn('could not release the reaper lease; it lapses on its own', { err, attempts: attempt, leaseMs: this.leaseMs });
          break;
        }
        await new Promise((r) => setTimeout(r, wait));
      }
    }
    this.validUntil = 0;
    this.leaveProcess();
  }

  private leaveProcess(): void {
    if (!this.inProcess) return;
    this.inProcess = false;
    active.delete(`${this.db.afterlifeSchema}:${this.name}`);
  }
}
