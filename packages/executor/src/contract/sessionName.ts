/**
 * The liveness session's application_name: the executor ID and this incarnation, so `pg_stat_activity` says
 * which process start holds the lock (`afterlife_live_<executorId>@<incarnation>`, the ID cut to fit 63 bytes).
 */
export function livenessSessionName(executorId: string, incarnation: string | undefined): string {
  const tail = incarnation ? `@${incarnation}` : '';
  return `afterlife_live_${executorId.slice(0, 63 - 'afterlife_live_'.length - tail.length)}${tail}`;
}
