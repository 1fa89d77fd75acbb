import { runRetentionPass, type RetentionPassResult } from '../retention/pass.js';
import { enabled, policyOf } from '../retention/policy.js';
import { NOT_DUE } from './orphanedVersions.js';
import { type ReaperDeps, type ReaperState, skip, type Skipped, type TickContext } from './types.js';

/**
 * The reaper's hook for retention and the global timeout (shared/retention). It runs in the reaper's
 * ticks rather than a function of its own: the reaper already has the single-flight lease (one pass at a
 * time in a deployment, though a pass is safe beside another — the CLI's), the invocation budget, the
 * schedule and the database grants. Its cost to detection is bounded by a slice: at most
 * RETENTION_SLICE_MS of work in a sweep, once a second while a round has work, once a minute when idle.
 */
export const RETENTION_SLICE_MS = 200;
export const RETENTION_BUSY_EVERY_MS = 1_000;
export const RETENTION_IDLE_EVERY_MS = 60_000;

export async function retentionTick(deps: ReaperDeps, ctx: TickContext, state: ReaperState): Promise<RetentionPassResult | Skipped> {
  if (!enabled(policyOf(deps.config))) return skip('off');
  const now = deps.clock();
  if (state.retentionDueAt !== undefined && now < state.retentionDueAt) return skip(NOT_DUE);
  const r = await runRetentionPass(deps, {
    budget: ctx.budget,
    dryRun: ctx.dryRun,
    signal: ctx.signal,
    sliceMs: RETENTION_SLICE_MS,
    tuning: (state.retentionTuning ??= {}),
    listLimit: 100,
  });
  state.retentionDueAt = deps.clock() + (r.stoppedBecause === 'done' ? RETENTION_IDLE_EVERY_MS : RETENTION_BUSY_EVERY_MS);
  if (ctx.dryRun) {
    for (const id of r.wouldDelete ?? []) ctx.planned.push({ pass: 'retention', action: 'delete', workflowId: id });
    for (const id of r.timedOutWorkflows) ctx.planned.push({ pass: 'retention', action: 'cancel', workflowId: id });
  }
  return r;
}
