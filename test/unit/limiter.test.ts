import { describe, expect, it } from 'vitest';
import { CallBudgetExhaustedError, limitCalls } from '../../packages/executor/src/runtime/limiter.js';

/** The limiter: per-key cap, global cap, acquire timeout, release on error, no starvation across keys. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

describe('limitCalls', () => {
  it('caps concurrent calls per key', async () => {
    const l = limitCalls({ perKey: 2, global: 10, acquireTimeoutMs: 1_000 });
    const g = gate();
    let peak = 0;
    const calls = Array.from({ length: 6 }, () =>
      l.run('model-a', async () => {
        peak = Math.max(peak, l.active('model-a'));
        await g.opened;
      }),
    );
    await Promise.resolve();
    expect(l.active('model-a')).toBe(2);
    expect(l.waiting()).toBe(4);
    g.open();
    await Promise.all(calls);
    expect(peak).toBe(2);
    expect(l.active()).toBe(0);
  });

  it('caps concurrent calls globally across keys', async () => {
    const l = limitCalls({ perKey: 5, global: 3, acquireTimeoutMs: 1_000 });
    const g = gate();
    let peak = 0;
    const calls = ['a', 'b', 'c', 'd', 'e', 'a', 'b'].map((k) =>
      l.run(k, async () => {
        peak = Math.max(peak, l.active());
        await g.opened;
      }),
    );
    await Promise.resolve();
    expect(l.active()).toBe(3);
    g.open();
    await Promise.all(calls);
    expect(peak).toBe(3);
  });

  it('fails with a typed error after the acquire timeout, without running the call', async () => {
    const l = limitCalls({ perKey: 1, global: 1, acquireTimeoutMs: 50 });
    const g = gate();
    const holder = l.run('k', () => g.opened);
    let ran = false;
    const started = Date.now();
    const err = await l
      .run('k', () => {
        ran = true;
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CallBudgetExhaustedError);
    expect((err as CallBudgetExhaustedError).code).toBe('call_budget_exhausted');
    expect((err as CallBudgetExhaustedError).disposition).toBe('retry');
    expect((err as CallBudgetExhaustedError).key).toBe('k');
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(ran).toBe(false);
    expect(l.waiting()).toBe(0);
    g.open();
    await holder;
    expect(l.active()).toBe(0);
  });

  it('releases the slot when the call throws', async () => {
    const l = limitCalls({ perKey: 1, global: 1, acquireTimeoutMs: 100 });
    await expect(l.run('k', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(
      l.run('k', () => {
        throw new Error('sync boom');
      }),
    ).rejects.toThrow('sync boom');
    expect(l.active()).toBe(0);
    await expect(l.run('k', () => 'ok')).resolves.toBe('ok');
  });

  it('a slow key at its cap does not starve other keys waiting behind it', async () => {
    const l = limitCalls({ perKey: 2, global: 3, acquireTimeoutMs: 2_000 });
    const slow = gate();
    // The slow key fills its own cap and queues more calls ahead of everyone else.
    const slowCalls = Array.from({ length: 6 }, () => l.run('slow', () => slow.opened));
    await Promise.resolve();
    expect(l.active('slow')).toBe(2);
    // Fast calls arrive after the queued slow ones; they must use the free global slot right away.
    const order: string[] = [];
    const fast = Array.from({ length: 5 }, (_, i) => l.run('fast', async () => void order.push(`fast-${i}`)));
    await Promise.all(fast);
    expect(order).toHaveLength(5);
    expect(l.active('slow')).toBe(2);
    slow.open();
    await Promise.all(slowCalls);
    expect(l.active()).toBe(0);
  });

  it('serves waiters in arrival order when they fit', async () => {
    const l = limitCalls({ perKey: 1, global: 1, acquireTimeoutMs: 1_000 });
    const order: string[] = [];
    await Promise.all(['a', 'b', 'c', 'd'].map((k) => l.run(k, async () => void order.push(k))));
    expect(order).toEqual(['a', 'b', 'c', 'd']);
  });

  it('rejects nonsense limits', () => {
    expect(() => limitCalls({ perKey: 0, global: 1, acquireTimeoutMs: 1 })).toThrow(RangeError);
    expect(() => limitCalls({ perKey: 1, global: 1.5, acquireTimeoutMs: 1 })).toThrow(RangeError);
    expect(() => limitCalls({ perKey: 1, global: 1, acquireTimeoutMs: -1 })).toThrow(RangeError);
  });
});
