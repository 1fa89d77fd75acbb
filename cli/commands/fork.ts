import { hostname } from 'node:os';
import { repairDepsFromRuntime } from '../../shared/repair/deps.js';
import { autoFork, type AutoForkResult } from '../../shared/repair/situations/divergedFork.js';
import type { CliContext } from '../context.js';
import { inline } from '../format.js';
import type { ForkOutput } from '../schemas.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife-plane fork <workflowId> [--from-step N]`: the same bounded, deterministic fork the reaper makes of
 * a diverged workflow (ID `<root>-fork-<n>`, at most MAX_REPAIRS per lineage, then a dead letter), from the
 * first divergent step or from an earlier step N. A workflow that did not diverge is refused: afterlife
 * never forks an ordinary ERROR.
 */
export async function fork(ctx: CliContext, workflowId: string, o: { fromStep?: number }): Promise<CommandResult<ForkOutput>> {
  const { config } = ctx;
  const deps = repairDepsFromRuntime(await ctx.runtime(), { forkedBy: `cli@${hostname()}` });
  ctx.progress(`forking ${inline(workflowId)}${o.fromStep === undefined ? ' from its first divergent step' : ` from step ${o.fromStep}`}…`);
  const r = await autoFork(deps, workflowId, o.fromStep === undefined ? {} : { fromStep: o.fromStep });
  const out = toOutput(config.applicationName, r);
  return {
    json: out,
    text: `${describe(r, config.repair.maxRepairs)}\n`,
    exitCode: r.outcome === 'forked' || r.outcome === 'already-forked' ? 0 : 1,
  };
}

function toOutput(applicationName: string, r: AutoForkResult): ForkOutput {
  const base: ForkOutput = {
    command: 'fork',
    applicationName,
    workflowId: r.workflowId,
    outcome: r.outcome,
    newWorkflowId: null,
    root: null,
    n: null,
    startStep: null,
    reason: null,
    forks: null,
    deadLetterPublished: null,
    skippedBecause: null,
    status: null,
  };
  switch (r.outcome) {
    case 'forked':
    case 'already-forked':
      return { ...base, newWorkflowId: r.newWorkflowId, root: r.root, n: r.n, startStep: r.startStep, reason: r.reason };
    case 'dead-lettered':
      return { ...base, root: r.root, forks: r.forks, deadLetterPublished: r.published };
    case 'busy':
      return { ...base, root: r.root };
    case 'skipped':
      return { ...base, skippedBecause: r.why, status: r.status ?? null };
  }
}

function describe(r: AutoForkResult, maxForks: number): string {
  switch (r.outcome) {
    case 'forked':
      return `forked ${inline(r.workflowId)} → ${inline(r.newWorkflowId)} from step ${r.startStep} (fork ${r.n} of at most ${maxForks} in lineage ${inline(r.root)}; ${r.reason}).`;
    case 'already-forked':
      return `${inline(r.workflowId)} was already forked as ${inline(r.newWorkflowId)} (fork ${r.n} of lineage ${inline(r.root)}); nothing new.`;
    case 'dead-lettered':
      return `not forked: lineage ${inline(r.root)} used its ${r.forks} fork(s); it is dead-lettered${r.published ? ' (message published)' : ''}.`;
    case 'busy':
      return `not forked: another worker is forking lineage ${inline(r.root)} right now; retry in a moment.`;
    case 'skipped':
      return r.why === 'missing'
        ? `not forked: workflow ${inline(r.workflowId)} does not exist (in this application).`
        : r.why === 'not-diverged'
          ? `not forked: ${inline(r.workflowId)} did not diverge (status ${r.status ?? 'unknown'}); afterlife forks only DBOSUnexpectedStepError.`
          : `not forked: ${inline(r.workflowId)} diverged but cannot be forked safely; see the logs.`;
  }
}
