import { deadExecutorsPass } from './deadExecutors.js';
import { fnv1a } from './fleetView.js';
import { divergedPass } from './diverged.js';
import { NOT_DUE, orphanedVersionsPass } from './orphanedVersions.js';
import { retentionTick } from './retention.js';
import { stuckPass } from './stuck.js';
import { unguardedPass } from './unguarded.js';
import { timelinePass } from './timelines.js';
import {
  type PassOutcome,
  type ReaperDeps,
  type ReaperState,
  skip,
  type Skipped,
  SWEEP_PASS_NAMES,
  type TickContext,
  type TickResult,
} from './types.js';
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
 * passes look for what takes minutes or hours to matter (stuck, diverged, orphaned), so each runs at most
 * once a second.
 */
export const SWEEP_EVERY_MS = 1_000;

/**
 * The work of the once-a-second sweep, in the order a tick runs what it takes of it: stuck first (it
 * judges the executors the dead pass found alive this tick), retention and timelines late (history and a
 * log line can wait for live work's passes), the unguarded-applications line last (itself every 10 s).
 */
export const SWEEP = [...SWEEP_PASS_NAMES, 'unguarded'] as const;
export type SweepPart = (typeof SWEEP)[number];

/**
 * What of the sweep this tick runs. An invocation's first tick runs all of it (a fresh view, and
 * `reap --once` looks at everything once); after that each part runs once it is SWEEP_EVERY_MS past its
 * last run, at most a share of the parts per tick (the sweep spread over the ticks of a second, the
 * longest-waiting first), so no tick carries more than the dead pass and one slice of the sweep: a long
 * tick every second is what a tick p99 sees, and the fleet's next death waits behind it.
 */
export function sweepSlice(sweptAt: Partial<Record<SweepPart, number>> | undefined, now: number, tickMs: number): SweepPart[] {
  if (sweptAt === undefined) return [...SWEEP];
  const ticksPerSweep = Math.max(1, Math.floor(SWEEP_EVERY_MS / tickMs));
  const perTick = Math.ceil(SWEEP.length / ticksPerSweep);
  const waiting = (part: SweepPart) => sweptAt[part] ?? -Infinity;
  const due = SWEEP.filter((part) => now - waiting(part) >= SWEEP_EVERY_MS);
  const taken = new Set([...due].sort((a, b) => waiting(a) - waiting(b)).slice(0, perTick));
  return SWEEP.filter((part) => taken.has(part));
}

/**
 * One tick: dead executors, then the slice of the sweep due (sweepSlice): stuck workflows on the executors
 * the dead pass found alive, diverged workflows, ENQUEUED rows of versions no live executor runs,
 * retention, deaths' timelines. A failing pass is recorded and the others still run; the next tick tries again.
 */
export async function runTick(deps: ReaperDeps, ctx: TickContext, state: ReaperState = {}): Promise<TickResult> {
  const started = performance.now();
  const timed = async <R extends object>(fn: () => Promise<R | Skipped>): Promise<PassOutcome<R>> => {
    const t0 = performance.now();
    try {
      const out = await fn();
      const durationMs = round(performance.now() - t0);
      return isSkipped(out) ? { ...out, durationMs } : { kind: 'ran', ...out, durationMs };
    } catch (err) {
      deps.logger.error('reaper pass failed; the next tick retries', { tick: ctx.tick, err });
      return { kind: 'error', error: errorMessage(err), durationMs: round(performance.now() - t0) };
    }
  };
  const dead = await timed(() => deadExecutorsPass(deps, ctx, state));
  const { tickMs, stuckAfterMs } = deps.config.reaper;
  const now = deps.clock();
  const slice = new Set(sweepSlice(state.sweptAt, now, tickMs));
  const sweptAt = (state.sweptAt ??= {});
  for (const part of slice) sweptAt[part] = now;
  const notDue = { ...skip(NOT_DUE), durationMs: 0 };
  const stuck: TickResult['stuck'] = !slice.has('stuck')
    ? notDue
    : dead.kind !== 'ran'
      ? { ...skip('dead-executor pass failed: live owners unknown'), durationMs: 0 }
      : await timed(() => stuckPass(deps, ctx, stuckSlice(dead.liveOwners, deps.clock(), stuckAfterMs, Math.max(tickMs, SWEEP_EVERY_MS))));
  const diverged = slice.has('diverged') ? await timed(() => divergedPass(deps, ctx, state)) : notDue;
  const orphaned = slice.has('orphaned') ? await timed(() => orphanedVersionsPass(deps, ctx, state)) : notDue;
  const retention = slice.has('retention') ? await timed(() => retentionTick(deps, ctx, state)) : notDue;
  const timelines = slice.has('timelines') ? await timed(() => timelinePass(deps, ctx)) : notDue;
  // Not a pass of the tick's result: a line for the operator about other applications, every 10 s.
  if (slice.has('unguarded')) await unguardedPass(deps, state, ctx.dryRun);
  return { tick: ctx.tick, durationMs: round(performance.now() - started), dead, stuck, diverged, orphaned, retention, timelines };
}

function isSkipped(out: object): out is Skipped {
  return 'kind' in out && out.kind === 'skipped';
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
