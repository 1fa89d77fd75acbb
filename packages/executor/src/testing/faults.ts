/**
 * Named fault points: the places where a crash or a race matters. Production passes `noFaults`, whose
 * `hit` returns without awaiting anything; tests install handlers that write a row, kill a connection
 * or throw, so a race is reproduced by construction instead of by sleeping.
 * @module
 */

export type FaultContext = Record<string, unknown>;
export type FaultHandler = (ctx: FaultContext) => void | Promise<void>;

export interface Faults {
  readonly enabled: boolean;
  hit(point: string, ctx?: FaultContext): void | Promise<void>;
}

export const noFaults: Faults = { enabled: false, hit: () => undefined };

export class FaultInjector implements Faults {
  readonly enabled = true;
  readonly hits: Array<{ point: string; ctx: FaultContext }> = [];
  private readonly handlers = new Map<string, FaultHandler>();

  on(point: string, handler: FaultHandler): this {
    this.handlers.set(point, handler);
    return this;
  }

  /** A handler that fires only on its nth hit (1-based) of that point. */
  onNth(point: string, n: number, handler: FaultHandler): this {
    let count = 0;
    return this.on(point, (ctx) => {
      count += 1;
      return count === n ? handler(ctx) : undefined;
    });
  }

  off(point: string): this {
    this.handlers.delete(point);
    return this;
  }

  async hit(point: string, ctx: FaultContext = {}): Promise<void> {
    this.hits.push({ point, ctx });
    await this.handlers.get(point)?.(ctx);
  }
}
