import { describe, expect, it } from 'vitest';
import { DbBudget } from '../../shared/db/budget.js';
import { DbBusyError, classify } from '../../shared/errors.js';
import { budgetFrom } from '../../shared/lifecycle/deadline.js';

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
