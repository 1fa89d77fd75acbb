/**
 * The kit's own clock on its lease. A process stopped (SIGSTOP, a paused VM, a loop blocked on one
 * synchronous call) for longer than its lease minus one renewal may have lost its liveness session: the server
 * ends it by `idle_session_timeout`, the reaper declares the executor dead and a replacement claims its
 * workflows. On waking, the fence question would tell it so, but only once its reconnect gets that far
 * (~0.5 s); meanwhile DBOS goes on with whatever I/O completed during the stop, and can begin the workflow's
 * next step beside the replacement. This watch needs no round trip: a timer whose own gap (a monotonic clock,
 * which runs through a stop) shows the stop. It fires in the first timers phase after the wake, before any
 * step whose start needed a round trip sent after it (DBOS reads a step's checkpoint before it runs the step: `callStepFunction` awaits
 * `getOperationResultAndThrowIfCancelled` first, in DBOS for TypeScript 5.2.11–5.3; frozen.test.ts and bench/chaos.ts
 * meet the real SDK),
 * and the kit exits as a fenced one does. A stop shorter than the threshold — the 5 s freeze the lease is sized
 * for — is never one.
 * @module
 */

import { LIVENESS_RENEW_EVERY_MS } from '../contract/lease.js';

/** How often the watch looks at its clock; the threshold allows for this much of its own lateness. */
export const STALL_CHECK_EVERY_MS = 250;

/** A stop at least this long may have outlived the lease: the last renewal was up to one period before it. */
export function stallThresholdMs(leaseMs: number): number {
  return leaseMs - LIVENESS_RENEW_EVERY_MS;
}

export interface StallWatchOptions {
  /** The lease as the liveness session has it now (a shorter one the database sets is kept). */
  leaseMs: () => number;
  /** Called once, synchronously in the timer, with how long the process was stopped. */
  onStall: (stoppedMs: number) => void;
  /** Tests: the monotonic clock (default performance.now). */
  now?: () => number;
}

export class StallWatch {
  private timer: NodeJS.Timeout | undefined;
  private last = 0;
  private fired = false;
  private readonly now: () => number;

  constructor(private readonly o: StallWatchOptions) {
    this.now = o.now ?? (() => performance.now());
  }

  start(): void {
    this.last = this.now();
    this.timer = setInterval(() => this.look(), STALL_CHECK_EVERY_MS);
    this.timer.unref();
  }

  /** One look at the clock: the gap since the previous look, less the period, is how long the process stood still. */
  look(): void {
    const at = this.now();
    const stoppedMs = at - this.last - STALL_CHECK_EVERY_MS;
    this.last = at;
    if (this.fired || stoppedMs < stallThresholdMs(this.o.leaseMs())) return;
    this.fired = true;
    this.stop();
    this.o.onStall(Math.round(stoppedMs));
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
