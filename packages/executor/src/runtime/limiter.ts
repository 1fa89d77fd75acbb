import { AfterlifeError } from '../errors.js';

/**
 * A limiter for outbound agent calls (LLM and tool APIs): at most `perKey` calls per key and `global`
 * calls in total, waiting at most `acquireTimeoutMs` for a slot. Unbounded fan-out is failure 5 of the design
 * (docs/design.md#failure-5-connection-exhaustion): it exhausts sockets, rate limits and pools for everything sharing the process.
 *
 * Fairness: waiters are served in arrival order, but a waiter whose key is at its own cap is skipped
 * rather than blocking the line, so one slow key can never starve the others of global slots.
 */
export interface LimitOptions {
  /** Concurrent calls per key (e.g. per model or per tenant). */
  perKey: number;
  /** Concurrent calls across all keys. */
  global: number;
  /** How long `run` waits for a slot before `CallBudgetExhaustedError`. */
  acquireTimeoutMs: number;
}

/** No slot became free within `acquireTimeoutMs`; the call never started, so retrying later is safe. */
export class CallBudgetExhaustedError extends AfterlifeError {
  constructor(
    readonly key: string,
    readonly waitedMs: number,
    readonly scope: 'key' | 'global',
  ) {
    super(`call limiter: no ${scope} slot for key "${key}" within ${waitedMs} ms`, 'call_budget_exhausted', 'retry');
  }
}

export interface CallLimiter {
  run<T>(key: string, fn: () => Promise<T> | T): Promise<T>;
  /** Calls running now, in total and for one key. */
  active(key?: string): number;
  /** Callers waiting for a slot. */
  waiting(): number;
}

interface Waiter {
  key: string;
  grant: () => void;
}

export function limitCalls(opts: LimitOptions): CallLimiter {
  for (const k of ['perKey', 'global'] as const) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new RangeError(`limitCalls: ${k} must be a positive integer`);
  }
  if (!(opts.acquireTimeoutMs >= 0)) throw new RangeError('limitCalls: acquireTimeoutMs must be >= 0');

  const perKey = new Map<string, number>();
  let total = 0;
  const queue: Waiter[] = [];

  const fits = (key: string) => total < opts.global && (perKey.get(key) ?? 0) < opts.perKey;
  const take = (key: string) => {
    total += 1;
    perKey.set(key, (perKey.get(key) ?? 0) + 1);
  };
  const release = (key: string) => {
    total -= 1;
    const n = (perKey.get(key) ?? 1) - 1;
    if (n === 0) perKey.delete(key);
    else perKey.set(key, n);
    // Hand freed capacity to the oldest waiters that fit, skipping keys at their own cap.
    for (let i = 0; i < queue.length && total < opts.global;) {
      const w = queue[i] as Waiter;
      if (fits(w.key)) {
        queue.splice(i, 1);
        take(w.key);
        w.grant();
      } else {
        i += 1;
      }
    }
  };

  const acquire = (key: string): Promise<void> => {
    if (queue.length === 0 && fits(key)) {
      take(key);
      return Promise.resolve();
    }
    // Someone older may be waiting for the same capacity; queue behind them (arrival order), unless this
    // key fits and every older waiter is blocked by its own key cap (then the line does not block us).
    if (fits(key) && queue.every((w) => (perKey.get(w.key) ?? 0) >= opts.perKey)) {
      take(key);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const started = Date.now();
      const waiter: Waiter = {
        key,
        grant: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        const i = queue.indexOf(waiter);
        if (i >= 0) queue.splice(i, 1);
        const scope = (perKey.get(key) ?? 0) >= opts.perKey ? 'key' : 'global';
        reject(new CallBudgetExhaustedError(key, Date.now() - started, scope));
      }, opts.acquireTimeoutMs);
      queue.push(waiter);
    });
  };

  return {
    async run<T>(key: string, fn: () => Promise<T> | T): Promise<T> {
      await acquire(key);
      try {
        return await fn();
      } finally {
        // Released on success and on throw alike: a failing call must not leak its slot.
        release(key);
      }
    },
    active: (key?: string) => (key === undefined ? total : (perKey.get(key) ?? 0)),
    waiting: () => queue.length,
  };
}
