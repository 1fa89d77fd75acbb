import { readTimeline } from '../../shared/db/queries/readTimeline.js';
import { AfterlifeError } from '../../packages/executor/src/errors.js';
import { timelineView } from '../../shared/timeline/view.js';
import type { CliContext } from '../context.js';
import type { TimelineOutput } from '../schemas.js';
import { renderTimeline } from './timelineText.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife timeline <executorId | recovery number>`: one death drawn as its stages and the gaps between
 * them. An all-digit argument is a recovery's audit number (`afterlife status` lists them), unless no
 * recovery has it and an executor of that name died. Read-only.
 */
export async function timeline(ctx: CliContext, target: string): Promise<CommandResult<TimelineOutput>> {
  const app = ctx.config.applicationName;
  const byRecovery = /^\d{1,18}$/.test(target) ? await readTimeline(ctx.db, app, { recoveryId: Number(target) }) : undefined;
  const row = byRecovery ?? (await readTimeline(ctx.db, app, { executorId: target }));
  if (!row)
    throw new AfterlifeError(
      `no recovery timeline for "${target}" (an executor ID, or a recovery number from afterlife-plane status)`,
      'not_found',
      'permanent',
    );
  const out: TimelineOutput = { command: 'timeline', applicationName: app, timeline: timelineView(row) };
  return { json: out, text: renderTimeline(out.timeline), exitCode: 0 };
}
