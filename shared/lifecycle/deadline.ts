/**
 * A work budget measured against the invocation deadline: loops ask `remaining()` at batch boundaries
 * and stop early enough to release locks and answer before the platform kills the request.
 */
export interface Budget {
  readonly deadline: number;
  remaining(): number;
  expired(): boolean;
}

export function budgetFrom(start: number, timeoutS: number, marginMs: number, clock: () => number = Date.now): Budget {
  // Never less than a second of work, and never a margin bigger than half the timeout.
  const margin = Math.min(marginMs, (timeoutS * 1000) / 2);
  return budgetUntil(start + Math.max(1_000, timeoutS * 1000 - margin), clock);
}

/** A budget that ends at `deadline` (epoch ms on `clock`). */
export function budgetUntil(deadline: number, clock: () => number = Date.now): Budget {
  return {
    deadline,
    remaining: () => deadline - clock(),
    expired: () => clock() >= deadline,
  };
}

export function unlimitedBudget(): Budget {
  return { deadline: Number.POSITIVE_INFINITY, remaining: () => Number.POSITIVE_INFINITY, expired: () => false };
}
