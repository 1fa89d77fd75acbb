import type { Budget } from '../lifecycle/deadline.js';
import { deadExecutorsPass } from './deadExecutors.js';
import { fnv1a } from './fleetView.js';
import { divergedPass } from './diverged.js';
import { NOT_DUE, orphanedVersionsPass } from './orphanedVersions.js';
import { retentionTick } from './retention.js';
import { stuckPass } from './stuck.js';
import { unguardedPass } from './unguarded.js';
import { timelinePass } from './timelines.js';
import type { ReaperDeps, ReaperState, TickContext, TickResult } from './types.js';
import { errorMessage } from '../../packages/executor/src/plane/index.js';

/**
 * The stuck pass examines each live executor's workflows once every STUCK_AFTER_MS / 60 (a minute for the
 * default hour; every tick for short thresholds): each tick takes the slice of executors whose ID hashes to
 * the current time slot. Finding a stuck workflow 1/60 of the threshold late changes nothing, and it keeps
 * every tick equally cheap — the pass reads the checkpoints of every quiet-looking PENDING row, the most
 * expensive statement of a tick. The slot comes from the clock, so it keeps rotating across invocations.
 */
export function stuckSlice(executorIds: string[], now: number, stuckAfterMs: number, tickMs: number): string[] {
  const every = Math.min(60_000, Math.max(tickMs, Math.floor(stuckAfterMs / 60)));
  const slices = Math.max(1, Math.round(every / tickMs));
  if (slices === 1) return executorIds;
  const slot = Math.floor(now / tickMs) % slices;
  return executorIds.filter((id) => fnv1a(id) % slices === slot);
}

/**
 * The dead-executor pass runs every tick (four a second by default: detection waits on it); the other
 * passes look for what takes minutes or hours to matter (stuck, diverged, orphaned), so they run at most
 * once a second and a fast tick stays one cheap pass.
 */
export const SWEEP_EVERY_MS = 1_000;

/**
 * One tick: dead executors, then stuck workflows on the executors that pass found alive, then diverged
 * workflows, then (when due) ENQUEUED rows of versions no live executor runs. A failing pass is recorded and the others still run; the next tick tries again.
 */
export async function runTick(deps: ReaperDeps, tickCtx: TickContext, budget: Budget, state: ReaperState = {}): Promise<TickResult> {
  const started = performance.now();
  const ctx: TickContext = { ...tickCtx, budget };
  const timed = async <T>(fn: () => Promise<T>): Promise<(T & { durationMs: number }) | { error: string; durationMs: number }> => {
    const t0 = performance.now();
    try {
      const out = await fn();
      return { ...out, durationMs: round(performance.now() - t0) };
    } catch (err) {
      deps.logger.error('reaper pass failed; the next tick retries', { tick: ctx.tick, err });
      return { error: errorMessage(err), durationMs: round(performance.now() - t0) };
    }
  };
  const dead = await timed(() => deadExecutorsPass(deps, ctx, budget, state));
  const { tickMs, stuckAfterMs } = deps.config.reaper;
  const now = deps.clock();
  if (state.sweptAt !== undefined && now - state.sweptAt < SWEEP_EVERY_MS) {
    const notDue = { skipped: NOT_DUE, durationMs: 0 };
    return {
      tick: ctx.tick,
      durationMs: round(performance.now() - started),
      dead,
      stuck: notDue,
      diverged: notDue,
      orphaned: notDue,
      retention: notDue,
      timelines: notDue,
    };
  }
  state.sweptAt = now;
  const stuck: TickResult['stuck'] =
    'error' in dead
      ? { skipped: 'dead-executor pass failed: live owners unknown', durationMs: 0 }
      : await timed(() => stuckPass(deps, ctx, stuckSlice(dead.liveOwners, deps.clock(), stuckAfterMs, Math.max(tickMs, SWEEP_EVERY_MS))));
  const diverged = await timed(() => divergedPass(deps, ctx, state));
  const orphaned = await timed(() => orphanedVersionsPass(deps, ctx, state));
  // Retention (shared/retention) last: history can wait for live work's passes.
  const retention = await timed(() => retentionTick(deps, ctx, state));
  // Closing deaths' timelines last of all: a log line that can wait a second for everything else.
  const timelines = await timed(() => timelinePass(deps, ctx));
  // Not a pass of the tick's result: a line for the operator about other applications, every 10 s.
  await unguardedPass(deps, state, ctx.dryRun);
  return { tick: ctx.tick, durationMs: round(performance.now() - started), dead, stuck, diverged, orphaned, retention, timelines };
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
