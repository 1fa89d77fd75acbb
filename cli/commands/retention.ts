import { budgetUntil } from '../../shared/lifecycle/deadline.js';
import { runRetentionPass, type RetentionPassResult } from '../../shared/retention/pass.js';
import { describePolicy } from '../../shared/retention/policy.js';
import { noFaults } from '../../packages/executor/src/plane/index.js';
import type { CliContext } from '../context.js';
import { duration, inline } from '../format.js';
import type { RetentionOutput } from '../schemas.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife-plane retention [--dry-run] [--budget-s S]`: one retention pass with the configured policy
 * (RETENTION_MAX_COMPLETED, RETENTION_MAX_AGE_MS, WORKFLOW_GLOBAL_TIMEOUT_MS), run to the end or the
 * budget (default 15 min; a later run continues the round). The same pass the reaper runs a slice of
 * each second, safe beside it. --dry-run lists what would go and changes nothing.
 */
export async function retention(ctx: CliContext, o: { dryRun: boolean; budgetS: number }): Promise<CommandResult<RetentionOutput>> {
  const r = await runRetentionPass(
    { config: ctx.config, db: ctx.db, logger: ctx.logger, faults: noFaults, clock: Date.now },
    {
      budget: budgetUntil(Date.now() + o.budgetS * 1000),
      dryRun: o.dryRun,
      onBatch: (b) => ctx.progress(`  batch: deleted ${b.deleted} in ${duration(b.durationMs)} (batch size ${b.batchSize})`),
    },
  );
  const out = toOutput(ctx.config.applicationName, r);
  return { json: out, text: render(out), exitCode: 0 };
}

function toOutput(applicationName: string, r: RetentionPassResult): RetentionOutput {
  return {
    command: 'retention',
    applicationName,
    dryRun: r.dryRun,
    policy: {
      maxCompleted: r.policy.maxCompleted ?? null,
      maxAgeMs: r.policy.maxAgeMs ?? null,
      globalTimeoutMs: r.policy.globalTimeoutMs ?? null,
    },
    summary: describePolicy(r.policy, duration),
    deleted: r.deleted,
    steps: r.steps,
    inputs: r.inputs,
    outputs: r.outputs,
    batches: r.batches,
    longestBatchMs: r.longestBatchMs,
    timedOut: r.timedOut,
    timedOutWorkflows: r.timedOutWorkflows,
    wouldDelete: r.wouldDelete ?? [],
    cutoffAt: r.cutoffMs === null ? null : new Date(r.cutoffMs).toISOString(),
    roundFinished: r.roundFinished,
    stoppedBecause: r.stoppedBecause,
    own: r.own ?? null,
    durationMs: Math.max(0, Math.round(r.durationMs)),
  };
}

function render(r: RetentionOutput): string {
  const lines = [r.summary];
  if (r.stoppedBecause === 'off')
    return `${lines.join('\n')}\nnothing to do: set RETENTION_MAX_COMPLETED, RETENTION_MAX_AGE_MS or WORKFLOW_GLOBAL_TIMEOUT_MS.\n`;
  if (r.cutoffAt) lines.push(`cutoff: workflows completed before ${r.cutoffAt}`);
  if (r.dryRun) {
    lines.push(
      `dry run (nothing changed): ${r.deleted} completed workflow(s) would be deleted; ${r.timedOut} would be cancelled by the global timeout`,
    );
    if (r.wouldDelete.length)
      lines.push(
        `would delete: ${r.wouldDelete.slice(0, 50).map(inline).join(', ')}${r.wouldDelete.length > 50 ? `, … (${r.wouldDelete.length} listed in --json)` : ''}`,
      );
    // Workflow IDs are the app's strings: a newline in one must not forge a line of this output.
    if (r.timedOutWorkflows.length) lines.push(`would cancel: ${r.timedOutWorkflows.map(inline).join(', ')}`);
  } else {
    lines.push(
      `deleted ${r.deleted} workflow(s) (${r.steps} steps, ${r.inputs} inputs, ${r.outputs} outputs) in ${r.batches} batch(es), longest ${duration(r.longestBatchMs)}; ` +
        `cancelled ${r.timedOut} by the global timeout; ${duration(r.durationMs)}`,
    );
    if (r.timedOutWorkflows.length) lines.push(`timed out: ${r.timedOutWorkflows.map(inline).join(', ')}`);
    if (r.own)
      lines.push(
        `afterlife's own tables: ${Object.entries(r.own)
          .map(([k, v]) => `${v} ${k}`)
          .join(', ')}`,
      );
  }
  lines.push(
    r.roundFinished
      ? 'round finished: everything beyond the thresholds has been examined'
      : `stopped (${r.stoppedBecause}): run again to continue the round`,
  );
  return `${lines.join('\n')}\n`;
}
