import { reaperDeps } from '../../shared/reaper/deps.js';
import { runReaper, type ReaperSummary } from '../../shared/reaper/index.js';
import type { CliContext } from '../context.js';
import { duration, inline, table } from '../format.js';
import { tickProgress } from '../progress.js';
import type { ReapOutput } from '../schemas.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife-plane reap [--dry-run] [--ticks N]`: the reaper's own invocation (single-flight lease, then N
 * ticks REAPER_TICK_MS apart: dead executors, stuck and diverged workflows), from a terminal. Death needs
 * evidence on two ticks, so the default is 2. --dry-run lists what it would do and changes nothing. When
 * the deployed reaper holds the lease, this is skipped (exit 0, said so).
 */
export async function reap(ctx: CliContext, o: { dryRun: boolean; ticks: number }): Promise<CommandResult<ReapOutput>> {
  const rt = await ctx.runtime();
  const deps = { ...reaperDeps(rt), detectedBy: `afterlife-cli@${process.pid}` };
  ctx.progress(
    `reaping ${ctx.config.applicationName}: ${o.ticks} tick(s) ${duration(ctx.config.reaper.tickMs)} apart${o.dryRun ? ' (dry run)' : ''}…`,
  );
  const summary = await runReaper(deps, {
    dryRun: o.dryRun,
    maxTicks: o.ticks,
    onTick: (r) => {
      ctx.progress(`  ${tickProgress(r, o.ticks)}`);
      if (r.dead.kind === 'ran') for (const id of r.dead.declared) ctx.progress(`  declared dead: ${id}`);
    },
  });
  const out = toOutput(ctx.config.applicationName, summary);
  return { json: out, text: render(out), exitCode: 0 };
}

function toOutput(applicationName: string, s: ReaperSummary): ReapOutput {
  if (s.outcome === 'skipped') {
    return {
      command: 'reap',
      applicationName,
      dryRun: s.dryRun,
      outcome: 'skipped',
      reason: s.reason,
      ticks: 0,
      durationMs: 0,
      declaredDead: [],
      stuckWorkflows: [],
      planned: [],
      errors: [],
      heartbeatSkipped: [],
    };
  }
  return {
    command: 'reap',
    applicationName,
    dryRun: s.dryRun,
    outcome: 'completed',
    reason: null,
    ticks: s.ticks,
    durationMs: s.durationMs,
    declaredDead: s.declaredDead,
    stuckWorkflows: s.stuckWorkflows,
    planned: (s.planned ?? []).map((p) => ({
      pass: p.pass,
      action: p.action,
      executorId: p.executorId ?? null,
      workflowId: p.workflowId ?? null,
    })),
    errors: s.errors,
    heartbeatSkipped: s.heartbeatSkipped,
  };
}

function render(r: ReapOutput): string {
  if (r.outcome === 'skipped')
    return `reap skipped: ${r.reason ?? 'another reaper holds the lease'} (the running reaper is doing this work).\n`;
  const lines = [
    `reaper: ${r.ticks} tick(s) in ${duration(r.durationMs)}${r.dryRun ? ' (dry run: nothing changed)' : ''}`,
    `declared dead: ${r.declaredDead.length ? r.declaredDead.map(inline).join(', ') : 'none'}`,
    `stuck workflows: ${r.stuckWorkflows.length ? r.stuckWorkflows.map(inline).join(', ') : 'none'}`,
  ];
  if (r.heartbeatSkipped.length) lines.push(`heartbeat evidence skipped: ${r.heartbeatSkipped.join('; ')} (nothing declared dead on it)`);
  if (r.planned.length) {
    lines.push(
      '',
      'would do:',
      table(
        ['PASS', 'ACTION', 'EXECUTOR', 'WORKFLOW'],
        r.planned.map((p) => [p.pass, p.action, p.executorId ?? '-', p.workflowId ?? '-']),
      ),
    );
  }
  if (r.errors.length) lines.push('', `errors: ${r.errors.map((e) => `tick ${e.tick} ${e.pass}: ${e.error}`).join('; ')}`);
  return `${lines.join('\n')}\n`;
}
