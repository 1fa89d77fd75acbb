import { describe, expect, it } from 'vitest';
import { budgetFrom } from '../../shared/lifecycle/deadline.js';
import { Lifecycle } from '../../packages/executor/src/lifecycle/orderedShutdown.js';

/** shared/lifecycle: reverse order, idempotent, every step guarded and bounded, tracked work first. */
describe('Lifecycle', () => {
  it('closes in reverse registration order, once, however often shutdown is called', async () => {
    const lc = new Lifecycle();
    const order: string[] = [];
    lc.onShutdown('postgres', () => order.push('postgres'));
    lc.onShutdown('redis', () => order.push('redis'));
    lc.onShutdown('pubsub', async () => void order.push('pubsub'));
    const a = lc.shutdown();
    const b = lc.shutdown();
    expect(b).toBe(a);
    await Promise.all([a, b, lc.shutdown()]);
    expect(order).toEqual(['pubsub', 'redis', 'postgres']);
  });

  it('aborts its signal at once, so loops stop at their next batch boundary', () => {
    const lc = new Lifecycle();
    expect(lc.shuttingDown).toBe(false);
    void lc.shutdown();
    expect(lc.signal.aborted).toBe(true);
    expect(lc.shuttingDown).toBe(true);
  });

  it('guards every step: a throwing or hanging closer is reported and the rest still run', async () => {
    const lc = new Lifecycle();
    const order: string[] = [];
    const errors: string[] = [];
    lc.onShutdown('postgres', () => order.push('postgres'));
    lc.onShutdown('hangs', () => new Promise(() => undefined));
    lc.onShutdown('throws', () => {
      throw new Error('boom');
    });
    lc.onShutdown('rejects', () => Promise.reject(new Error('nope')));
    await lc.shutdown({ perStepMs: 50, onError: (name, err) => errors.push(`${name}: ${(err as Error).message}`) });
    expect(order).toEqual(['postgres']);
    expect(errors).toEqual(['rejects: nope', 'throws: boom', 'hangs: timed out after 50 ms']);
  });

  it('waits for tracked work (bounded) before closing the connections it uses', async () => {
    const lc = new Lifecycle();
    const order: string[] = [];
    lc.onShutdown('postgres', () => order.push('postgres closed'));
    let finish!: () => void;
    const work = lc.track(
      new Promise<void>((r) => (finish = r)).then(() => {
        order.push('work released its lock');
      }),
    );
    const done = lc.shutdown();
    await new Promise((r) => setTimeout(r, 20));
    expect(order).toEqual([]);
    finish();
    await Promise.all([work, done]);
    expect(order).toEqual(['work released its lock', 'postgres closed']);

    const stuck = new Lifecycle();
    const errors: string[] = [];
    stuck.onShutdown('postgres', () => errors.push('closed anyway'));
    void stuck.track(new Promise(() => undefined));
    await stuck.shutdown({ drainMs: 30, onError: (name) => errors.push(name) });
    expect(errors).toEqual(['in-flight work', 'closed anyway']);
  });

  it('a failed tracked task does not fail the shutdown', async () => {
    const lc = new Lifecycle();
    const work = lc.track(Promise.reject(new Error('failed')));
    await expect(work).rejects.toThrow('failed');
    await expect(lc.shutdown()).resolves.toBeUndefined();
  });
});

describe('budgetFrom', () => {
  it('leaves the margin before the deadline, never less than a second of work', () => {
    let now = 1_000;
    const b = budgetFrom(1_000, 60, 5_000, () => now);
    expect(b.deadline).toBe(56_000);
    expect(b.remaining()).toBe(55_000);
    now = 56_000;
    expect(b.expired()).toBe(true);
    expect(budgetFrom(0, 1, 5_000).deadline).toBe(1_000);
  });
});
