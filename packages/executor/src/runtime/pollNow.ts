import type { Logger } from '../log.js';
import { launchedDbosModule } from './dbosInternals.js';

/**
 * Asks the DBOS this process launched to poll some of its queues now, once, instead of at its next scheduled
 * poll (contract/requeued.ts: a recovery has just re-enqueued a dead executor's work there). It runs DBOS's
 * own poll (`WFQueueRunner.pollQueue`: the claim DBOS runs every interval, SKIP LOCKED, status re-checked),
 * reached through the queue runner of the copy the app launched; 5.2.11 and 5.3.x have the same shape, and a
 * release that moves it makes `queuePoller` answer undefined — the kit then records that it cannot be asked
 * (kit facts) and recoveries ask others.
 *
 * Only queues without flow control are polled early. DBOS counts `workerConcurrency` (and a partition's) in
 * this process between its own polls, so a second poll racing the scheduled one could claim past the limit;
 * and it claims from a queue with a global limit with NOWAIT, so a race would read as contention and double
 * the queue's interval. Those queues keep DBOS's own cadence. `_dbos_internal_queue`, where recovered direct
 * starts go, has no limit, and its claim skips locked rows.
 */
export interface QueuePoller {
  /** Starts a poll of each named queue this process dispatches and may poll early; returns the names polled. */
  poll(queues: readonly string[]): string[];
  /** Whether the kit's poll budget has a poll left now (EARLY_POLL_BURST, EARLY_POLLS_PER_S). */
  canPoll(): boolean;
}

/**
 * One early poll per queue at most this often: a burst of notices (a recovery in many batches, or anyone who
 * can connect sending NOTIFY) becomes a few polls, which DBOS would have run within its interval anyway.
 */
export const MIN_EARLY_POLL_GAP_MS = 250;

/**
 * And at most this many early polls per kit, over all its queues: a bucket of EARLY_POLL_BURST (one full
 * notice's worth of queues) refilled at EARLY_POLLS_PER_S. Anyone who can connect may send notices at any
 * rate, naming every queue the app has, so the per-queue gap alone would let a stream buy four polls a second
 * per queue; with the bucket a stream of any rate costs a kit at most EARLY_POLL_BURST polls at once and
 * EARLY_POLLS_PER_S a second after that, each one DBOS claim transaction (docs/threat-model.md). A genuine
 * notice that finds the bucket empty loses nothing: its work is claimed at DBOS's next poll.
 */
export const EARLY_POLL_BURST = 20;
export const EARLY_POLLS_PER_S = 2;

/** A token bucket on the given clock: `take()` spends one token if there is one. */
export function pollBudget(clock: () => number, burst = EARLY_POLL_BURST, perS = EARLY_POLLS_PER_S) {
  let tokens = burst;
  let at = clock();
  const refill = () => {
    const now = clock();
    tokens = Math.min(burst, tokens + ((now - at) * perS) / 1_000);
    at = now;
  };
  return {
    take(): boolean {
      refill();
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    },
    /** Whether a poll could be bought now, without buying it (a notice is not even parsed otherwise). */
    any(): boolean {
      refill();
      return tokens >= 1;
    },
  };
}

interface QueueLike {
  name?: unknown;
  concurrency?: unknown;
  rateLimit?: unknown;
  workerConcurrency?: unknown;
  partitionWorkerConcurrency?: unknown;
  partitionConcurrency?: unknown;
  partitionRateLimit?: unknown;
  partitionQueue?: unknown;
}
interface RunnerLike {
  isRunning?: unknown;
  states?: unknown;
  pollQueue?: unknown;
}

export function queuePoller(log: Logger, clock: () => number = Date.now): QueuePoller | undefined {
  const found = launchedDbosModule('wfqueue.js');
  const runner = (found?.module as { wfQueueRunner?: RunnerLike } | undefined)?.wfQueueRunner;
  const exec = found?.executor;
  if (!runner || !exec || !(runner.states instanceof Map) || typeof runner.pollQueue !== 'function') {
    // Not an error: recoveries still move this executor's share of work, claimed at DBOS's next poll instead.
    log.notice(
      "this DBOS release's queue runner is not where the kit looks: recoveries will not ask this executor to claim recovered work at once (doctor's `versions` check lists it); run a tested @dbos-inc/dbos-sdk",
      { event: 'requeued_poll_unavailable' },
    );
    return undefined;
  }
  const states = runner.states as Map<string, { queue?: QueueLike }>;
  const pollQueue = runner.pollQueue as (exec: unknown, queue: QueueLike) => Promise<unknown>;
  const last = new Map<string, number>();
  const budget = pollBudget(clock);
  return {
    canPoll: () => budget.any(),
    poll(queues) {
      const polled: string[] = [];
      if (runner.isRunning !== true) return polled;
      const now = clock();
      for (const name of new Set(queues)) {
        const queue = states.get(name)?.queue;
        if (!queue || !pollsEarly(queue)) continue;
        if (now - (last.get(name) ?? -Infinity) < MIN_EARLY_POLL_GAP_MS) continue;
        if (!budget.take()) break;
        last.set(name, now);
        polled.push(name);
        // pollQueue logs and swallows the database's errors itself; anything else is DBOS's to report.
        pollQueue.call(runner, exec, queue).catch((err: unknown) => log.debug('early queue poll failed', { queue: name, err }));
      }
      return polled;
    },
  };
}

function pollsEarly(q: QueueLike): boolean {
  const none = (v: unknown) => v === undefined || v === null;
  return (
    none(q.concurrency) &&
    none(q.rateLimit) &&
    none(q.workerConcurrency) &&
    none(q.partitionWorkerConcurrency) &&
    none(q.partitionConcurrency) &&
    none(q.partitionRateLimit) &&
    q.partitionQueue !== true
  );
}
