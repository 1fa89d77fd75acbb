import { describe, expect, it } from 'vitest';
import { isTransientConnectError, jitteredBackoffMs, withConnectRetries } from '../../packages/executor/src/runtime/connectRetry.js';

describe('connect retries: bounded and jittered', () => {
  it('the wait doubles up to its cap and is drawn from the upper half of each step', () => {
    expect(jitteredBackoffMs(0, 100, 5_000, () => 0)).toBe(50);
    expect(jitteredBackoffMs(0, 100, 5_000, () => 1)).toBe(100);
    expect(jitteredBackoffMs(3, 100, 5_000, () => 0)).toBe(400);
    expect(jitteredBackoffMs(3, 100, 5_000, () => 1)).toBe(800);
    // Capped, however many failures came before.
    expect(jitteredBackoffMs(50, 100, 5_000, () => 1)).toBe(5_000);
    expect(jitteredBackoffMs(50, 100, 5_000, () => 0)).toBe(2_500);
  });

  it('a thousand kits on the same schedule do not come back together', () => {
    const waits = Array.from({ length: 1_000 }, () => jitteredBackoffMs(4, 100, 5_000));
    const spread = Math.max(...waits) - Math.min(...waits);
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(800);
    expect(Math.max(...waits)).toBeLessThanOrEqual(1_600);
    expect(spread).toBeGreaterThan(600);
    // No 10 ms slot holds more than a few percent of them.
    const slots = new Map<number, number>();
    for (const w of waits) slots.set(Math.floor(w / 10), (slots.get(Math.floor(w / 10)) ?? 0) + 1);
    expect(Math.max(...slots.values())).toBeLessThan(50);
  });

  it('tells a busy or starting server from a wrong URL', () => {
    expect(isTransientConnectError(Object.assign(new Error('sorry, too many clients already'), { code: '53300' }))).toBe(true);
    expect(isTransientConnectError(Object.assign(new Error('the database system is starting up'), { code: '57P03' }))).toBe(true);
    expect(isTransientConnectError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isTransientConnectError(new Error('timeout exceeded when trying to connect'))).toBe(true);
    expect(isTransientConnectError(new Error('Connection terminated due to connection timeout'))).toBe(true);
    expect(isTransientConnectError(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isTransientConnectError(Object.assign(new Error('password authentication failed'), { code: '28P01' }))).toBe(false);
    expect(isTransientConnectError(Object.assign(new Error('database "x" does not exist'), { code: '3D000' }))).toBe(false);
    expect(isTransientConnectError(undefined)).toBe(false);
  });

  it('retries transient failures up to its bound, never a permanent one', async () => {
    const slept: number[] = [];
    const sleep = (ms: number) => {
      slept.push(ms);
      return Promise.resolve();
    };
    let calls = 0;
    const flaky = () => {
      calls += 1;
      return calls <= 2 ? Promise.reject(new Error('timeout exceeded when trying to connect')) : Promise.resolve('ok');
    };
    await expect(withConnectRetries(flaky, { attempts: 5, minMs: 100, maxMs: 1_000, sleep })).resolves.toBe('ok');
    expect(calls).toBe(3);
    expect(slept).toHaveLength(2);

    calls = 0;
    const down = () => {
      calls += 1;
      return Promise.reject(new Error('timeout exceeded when trying to connect'));
    };
    await expect(withConnectRetries(down, { attempts: 4, minMs: 100, maxMs: 1_000, sleep })).rejects.toThrow(/timeout/);
    expect(calls).toBe(4);

    calls = 0;
    const wrong = () => {
      calls += 1;
      return Promise.reject(Object.assign(new Error('password authentication failed'), { code: '28P01' }));
    };
    await expect(withConnectRetries(wrong, { attempts: 4, minMs: 100, maxMs: 1_000, sleep })).rejects.toThrow(/password/);
    expect(calls).toBe(1);
  });
});
