import { describe, expect, it } from 'vitest';
import { DbBudget } from '../../packages/executor/src/db/budget.js';
import { DbBusyError, classify } from '../../packages/executor/src/errors.js';
import { Admission } from '../../shared/db/admission.js';
import { budgetFrom, budgetUntil } from '../../shared/lifecycle/deadline.js';

describe('DbBudget', () => {
  it('admits up to the limit, then fails fast with a retryable error', async () => {
    const b = new DbBudget(2, 0);
    const r1 = await b.acquire();
    await b.acquire();
    await expect(b.acquire()).rejects.toBeInstanceOf(DbBusyError);
    expect(classify(new DbBusyError(2, 2))).toBe('retry');
    r1();
    r1(); // releasing twice is harmless
    expect(b.active).toBe(1);
  });

  it('hands a released slot straight to a bounded waiter', async () => {
    const b = new DbBudget(1, 1_000);
    const r1 = await b.acquire();
    const waiting = b.acquire();
    r1();
    const r2 = await waiting;
    expect(b.active).toBe(1);
    r2();
    expect(b.active).toBe(0);
  });
});

describe('Admission', () => {
  it('queues deliveries in arrival order and serves each as a slot frees', async () => {
    const a = new Admission(1);
    const budget = budgetUntil(Date.now() + 60_000);
    const r1 = await a.enter(budget);
    const order: number[] = [];
    const waiting = [2, 3].map((n) => a.enter(budget).then((r) => (order.push(n), r)));
    expect(a.queued).toBe(2);
    r1();
    (await waiting[0])?.();
    (await waiting[1])?.();
    expect(order).toEqual([2, 3]);
    expect(a.active).toBe(0);
  });

  it('waits at most half the remaining budget, then answers retry-later', async () => {
    let now = 0;
    const a = new Admission(1);
    const hold = await a.enter(budgetUntil(10_000, () => now));
    now = 9_900; // 100 ms left: a 50 ms wait
    const t = Date.now();
    await expect(a.enter(budgetUntil(10_000, () => now))).rejects.toBeInstanceOf(DbBusyError);
    expect(Date.now() - t).toBeLessThan(1_000);
    expect(a.queued).toBe(0);
    hold();
  });

  it('ends the wait when the instance shuts down, and bounds the line', async () => {
    const stop = new AbortController();
    const a = new Admission(1, { maxQueued: 1, signal: stop.signal });
    const budget = budgetUntil(Date.now() + 60_000);
    const hold = await a.enter(budget);
    const waiting = a.enter(budget);
    await expect(a.enter(budget)).rejects.toBeInstanceOf(DbBusyError); // the line is full
    stop.abort();
    await expect(waiting).rejects.toBeInstanceOf(DbBusyError);
    expect(a.queued).toBe(0);
    await expect(a.enter(budget)).rejects.toBeInstanceOf(DbBusyError); // shutting down: no new waits
    hold();
    expect(a.active).toBe(0);
  });
});

describe('budgetFrom', () => {
  it('stops a margin before the function timeout, never below a second', () => {
    let now = 1_000;
    const b = budgetFrom(now, 60, 5_000, () => now);
    expect(b.deadline).toBe(1_000 + 55_000);
    now += 55_000;
    expect(b.expired()).toBe(true);
    expect(budgetFrom(0, 1, 5_000).deadline).toBe(1_000);
  });
});
