import { cancelledNotForked, markStuckAction, reportStuck, touchStuckAttempt } from '../db/queries/stuckWorkflows.js';
import { cancelIfStillQuiet, findQuietPending } from '../dbos/reaper.js';
import type { Logger } from '../../packages/executor/src/plane/index.js';
import { shouldStop, type ReaperDeps, type StuckPassResult, type TickContext } from './types.js';

/**
 * Stuck workflows: PENDING on an executor judged alive this tick, with no activity for STUCK_AFTER_MS —
 * typically claimed by a process that lacks the workflow function, or wedged in a step. Reported by
 * default; with `cancel-and-fork` or `cancel-and-repair` cancelled by a statement that re-checks status,
 * owner and the activity clock, then handed to the repair module (`repairStuck`: a fork, or with
 * cancel-and-repair a rewind in place).
 */

/** Both `cancel-and-fork` and `cancel-and-repair` (rewind in place, or a fork where it must) cancel first. */
const cancels = (policy: ReaperDeps['config']['reaper']['stuckPolicy']) => policy !== 'report';

/** Stuck workflows handled per tick; the rest wait for the next tick (the oldest go first). */
export const STUCK_BATCH = 100;

/** A cancelled-but-unforked row younger than this may be a running tick's own; older ones are leftovers. */
const LEFTOVER_MIN_AGE_MS = 60_000;
const LEFTOVER_MAX_AGE_MS = 24 * 3_600_000;

export async function stuckPass(deps: ReaperDeps, ctx: TickContext, liveOwners: string[]): Promise<StuckPassResult> {
  const { db, config } = deps;
  const app = config.applicationName;
  const log = deps.logger.child({ pass: 'stuck', tick: ctx.tick });
  const cutoffMs = deps.clock() - config.reaper.stuckAfterMs;
  const found = await findQuietPending(db, app, liveOwners, cutoffMs, STUCK_BATCH);
  const result: StuckPassResult = {
    examined: liveOwners.length,
    found: found.length,
    reported: 0,
    cancelled: 0,
    forked: 0,
    raced: 0,
    workflowIds: found.map((f) => f.workflowId),
  };
  if (cancels(config.reaper.stuckPolicy) && !ctx.dryRun && deps.repairStuck) result.forked += await forkLeftovers(deps, ctx, log);
  if (found.length === 0) return result;

  for (const f of found) {
    log.warn('workflow stuck on a live executor', {
      event: 'stuck_workflow',
      workflowId: f.workflowId,
      executorId: f.executorId,
      applicationVersion: f.applicationVersion,
      workflowName: f.name,
      quietForMs: deps.clock() - f.lastActivityMs,
      policy: config.reaper.stuckPolicy,
    });
  }
  if (ctx.dryRun) {
    for (const f of found) {
      ctx.planned.push({ pass: 'stuck', action: 'report', workflowId: f.workflowId, executorId: f.executorId });
      if (cancels(config.reaper.stuckPolicy))
        ctx.planned.push({ pass: 'stuck', action: 'cancel', workflowId: f.workflowId, executorId: f.executorId });
    }
    return result;
  }
  await reportStuck(db, app, found);
  result.reported = found.length;
  if (!cancels(config.reaper.stuckPolicy)) return result;

  for (const f of found) {
    if (shouldStop(ctx)) break;
    if (deps.faults.enabled)
      await deps.faults.hit('reaper.beforeCancelStuck', { workflowId: f.workflowId, executorId: f.executorId, cutoffMs });
    const cancelled = await cancelIfStillQuiet(db, { applicationName: app, workflowId: f.workflowId, executorId: f.executorId, cutoffMs });
    if (!cancelled) {
      // A checkpoint, a status change or a new owner landed since the SELECT: the workflow is not stuck.
      result.raced += 1;
      log.notice('stuck workflow changed (or another transaction holds it) before the cancel: left alone', { workflowId: f.workflowId });
      continue;
    }
    result.cancelled += 1;
    if (deps.faults.enabled) await deps.faults.hit('reaper.beforeForkStuck', { workflowId: f.workflowId });
    if ((await forkCancelled(deps, f.workflowId)) !== undefined) result.forked += 1;
  }
  return result;
}

/** Cancelled-but-unforked rows a dead reaper left (see cancelledNotForked), forked now; returns how many. */
async function forkLeftovers(deps: ReaperDeps, ctx: TickContext, log: Logger): Promise<number> {
  const app = deps.config.applicationName;
  let forked = 0;
  for (const workflowId of await cancelledNotForked(deps.db, app, {
    minAgeMs: LEFTOVER_MIN_AGE_MS,
    maxAgeMs: LEFTOVER_MAX_AGE_MS,
    limit: STUCK_BATCH,
  })) {
    if (shouldStop(ctx)) break;
    const forkedTo = await forkCancelled(deps, workflowId);
    if (forkedTo === undefined) {
      await touchStuckAttempt(deps.db, app, workflowId);
      log.warn('stuck workflow cancelled earlier is still not forked; retried later', { workflowId, event: 'stuck_not_forked' });
      continue;
    }
    forked += 1;
    log.notice('stuck workflow cancelled earlier is forked now', { workflowId, forkedTo });
  }
  return forked;
}

/** The fork of a workflow the reaper cancelled; the report says 'forked' once there is one. */
async function forkCancelled(deps: ReaperDeps, workflowId: string): Promise<string | undefined> {
  const forkedTo = await repairStuckHook(deps, workflowId);
  // A rewind goes on under the workflow's own ID.
  if (forkedTo !== undefined)
    await markStuckAction(deps.db, deps.config.applicationName, workflowId, forkedTo === workflowId ? 'rewound' : 'forked', forkedTo);
  return forkedTo;
}

/**
 * The "fork" half of cancel-and-fork. Until the fork module is wired into ReaperDeps, a cancelled stuck
 * workflow stays cancelled (reported in the afterlife table) and an operator decides.
 */
async function repairStuckHook(deps: ReaperDeps, workflowId: string): Promise<string | undefined> {
  if (!deps.repairStuck) {
    deps.logger.warn('stuck workflow cancelled; no fork module wired, so it is not forked', { workflowId, event: 'stuck_not_forked' });
    return undefined;
  }
  try {
    return await deps.repairStuck(workflowId);
  } catch (err) {
    deps.logger.error('forking a cancelled stuck workflow failed', { workflowId, err });
    return undefined;
  }
}
