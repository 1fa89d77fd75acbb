import { applicationsKnowing } from '../../shared/db/queries/otherApplications.js';
import { readTimeline } from '../../shared/db/queries/readTimeline.js';
import { AfterlifeError } from '../../packages/executor/src/plane/index.js';
import { timelineView } from '../../shared/timeline/view.js';
import type { CliContext } from '../context.js';
import { shellQuote } from '../format.js';
import type { TimelineOutput } from '../schemas.js';
import { renderTimeline } from './timelineText.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife-plane timeline <executorId | recovery number>`: one death drawn as its stages and the gaps between
 * them. An all-digit argument is a recovery's audit number (`afterlife-plane status` lists them), unless no
 * recovery has it and an executor of that name died. Read-only.
 */
export async function timeline(ctx: CliContext, target: string): Promise<CommandResult<TimelineOutput>> {
  const app = ctx.config.applicationName;
  const byRecovery = /^\d{1,18}$/.test(target) ? await readTimeline(ctx.db, app, { recoveryId: Number(target) }) : undefined;
  const row = byRecovery ?? (await readTimeline(ctx.db, app, { executorId: target }));
  if (!row) {
    // The database may hold several applications (npm start guards each whose kits register): say which
    // one knows this ID, and the command that shows it.
    const elsewhere = await applicationsKnowing(ctx.db, app, target, 5);
    const hint =
      elsewhere.length === 0
        ? ''
        : `; it is known under application ${elsewhere.map((a) => JSON.stringify(a)).join(', ')}: afterlife-plane timeline ${shellQuote(target)} --app ${shellQuote(elsewhere[0] ?? '')}`;
    throw new AfterlifeError(
      `no recovery timeline for ${JSON.stringify(target)} under application ${JSON.stringify(app)} (an executor ID, or a recovery number from afterlife-plane status)${hint}`,
      'not_found',
      'permanent',
    );
  }
  const out: TimelineOutput = { command: 'timeline', applicationName: app, timeline: timelineView(row) };
  return { json: out, text: renderTimeline(out.timeline), exitCode: 0 };
}
