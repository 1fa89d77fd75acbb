import type { Budget } from '../lifecycle/deadline.js';
import { deadExecutorsPass } from './deadExecutors.js';
import { divergedPass } from './diverged.js';
import { stuckPass } from './stuck.js';
import type { ReaperDeps, TickContext, TickResult } from './types.js';

/**
 * One tick: dead executors, then stuck workflows on the executors that pass found alive, then diverged
 * workflows. A failing pass is recorded and the others still run; the next tick tries again.
 */
export async function runTick(deps: ReaperDeps, ctx: TickContext, budget: Budget): Promise<TickResult> {
  const started = performance.now();
  const timed = async <T>(fn: () => Promise<T>): Promise<(T & { durationMs: number }) | { error: string; durationMs: number }> => {
    const t0 = performance.now();
    try {
      const out = await fn();
      return { ...out, durationMs: round(performance.now() - t0) };
    } catch (err) {
      deps.logger.error('reaper pass failed; the next tick retries', { tick: ctx.tick, err });
      return { error: err instanceof Error ? err.message : String(err), durationMs: round(performance.now() - t0) };
    }
  };
  const dead = await timed(() => deadExecutorsPass(deps, ctx, budget));
  const stuck =
    'error' in dead
      ? { skipped: 'dead-executor pass failed: live owners unknown', durationMs: 0 }
      : await timed(() => stuckPass(deps, ctx, dead.liveOwners));
  const diverged = await timed(() => divergedPass(deps, ctx));
  return { tick: ctx.tick, durationMs: round(performance.now() - started), dead, stuck, diverged };
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
