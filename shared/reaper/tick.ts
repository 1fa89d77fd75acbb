import type { Budget } from '../lifecycle/deadline.js';
import { deadExecutorsPass } from './deadExecutors.js';
import { divergedPass } from './diverged.js';
import { stuckPass } from './stuck.js';
import type { ReaperDeps, ReaperState, TickContext, TickResult } from './types.js';

/**
 * How often the stuck pass runs: STUCK_AFTER_MS / 60 (a minute for the default hour), at least every
 * tick. Being late by 1/60 of the threshold changes nothing, and the pass reads every quiet-looking
 * PENDING row's checkpoints, which is the most expensive statement of a tick.
 */
export function stuckEveryMs(stuckAfterMs: number, tickMs: number): number {
  return Math.min(60_000, Math.max(tickMs, Math.floor(stuckAfterMs / 60)));
}

/**
 * One tick: dead executors, then stuck workflows on the executors that pass found alive, then diverged
 * workflows. A failing pass is recorded and the others still run; the next tick tries again.
 */
export async function runTick(deps: ReaperDeps, ctx: TickContext, budget: Budget, state: ReaperState = {}): Promise<TickResult> {
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
  const { tickMs, stuckAfterMs } = deps.config.reaper;
  const stuckDue = state.stuckRanAt === undefined || deps.clock() - state.stuckRanAt >= stuckEveryMs(stuckAfterMs, tickMs) - tickMs / 2;
  let stuck: TickResult['stuck'];
  if ('error' in dead) stuck = { skipped: 'dead-executor pass failed: live owners unknown', durationMs: 0 };
  else if (!stuckDue) stuck = { skipped: 'not due', durationMs: 0 };
  else {
    stuck = await timed(() => stuckPass(deps, ctx, dead.liveOwners));
    if (!('error' in stuck)) state.stuckRanAt = deps.clock();
  }
  const diverged = await timed(() => divergedPass(deps, ctx, state));
  return { tick: ctx.tick, durationMs: round(performance.now() - started), dead, stuck, diverged };
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
