import { timelineStats } from '../../shared/db/queries/timelineStats.js';
import type { CliContext } from '../context.js';
import { duration } from '../format.js';
import type { StatusOutput } from '../schemas.js';

type RecoveryTimes = StatusOutput['recoveryTimes'];

/** Deaths since `since` and death → first step elsewhere, from their timelines (shared/timeline). */
export async function recoveryTimes(ctx: CliContext, since: Date): Promise<RecoveryTimes> {
  const s = await timelineStats(ctx.db, ctx.config.applicationName, since);
  return {
    since: since.toISOString(),
    deaths: s.deaths,
    open: s.open,
    measured: s.measured,
    deathToFirstStepMs: { p50: s.p50Ms, p95: s.p95Ms, max: s.maxMs },
    slowest:
      s.slowest && s.maxMs !== null
        ? {
            executorId: s.slowest.executorId,
            cause: s.slowest.cause,
            declaredAt: s.slowest.declaredAt.toISOString(),
            recoveryId: s.slowest.firstRecoveryId,
            deathToFirstStepMs: s.maxMs,
          }
        : null,
  };
}

export function renderRecoveryTimes(r: RecoveryTimes): string[] {
  const head = `deaths since ${r.since}: ${r.deaths}${r.open ? ` (${r.open} still open)` : ''}`;
  const { p50, p95, max } = r.deathToFirstStepMs;
  if (r.measured === 0 || p50 === null || p95 === null || max === null) return ['', head];
  const lines = [
    '',
    `${head}; death → first step elsewhere over ${r.measured}: p50 ${duration(p50)}, p95 ${duration(p95)}, max ${duration(max)}`,
  ];
  if (r.slowest)
    lines.push(
      `  slowest: ${r.slowest.executorId} (${r.slowest.cause}, declared ${r.slowest.declaredAt}): ${duration(r.slowest.deathToFirstStepMs)} — afterlife-plane timeline ${r.slowest.recoveryId}`,
    );
  return lines;
}
