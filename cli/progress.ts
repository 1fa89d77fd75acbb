import type { PassOutcome, TickResult } from '../shared/reaper/types.js';

/** One reaper tick as a progress line: what each pass found or did, and how long the tick took. */
export function tickProgress(tick: TickResult, maxTicks: number): string {
  const pass = <R extends object>(name: string, o: PassOutcome<R>, render: (r: R) => string): string => {
    if (o.kind === 'error') return `${name} ERROR ${o.error}`;
    if (o.kind === 'skipped') return `${name} skipped (${o.reason})`;
    // Ran, but could not act (e.g. no fork module wired): said like a skip.
    if ('skipped' in o && typeof o.skipped === 'string') return `${name} skipped (${o.skipped})`;
    return `${name} ${render(o)}`;
  };
  const parts = [
    pass(
      'dead',
      tick.dead,
      (p) =>
        `${p.candidates} candidate(s), ${p.absent} absent, ${p.declared.length} declared${p.reenqueued ? `, ${p.reenqueued} re-enqueued` : ''}`,
    ),
    pass('stuck', tick.stuck, (p) => `${p.found} found${p.cancelled ? `, ${p.cancelled} cancelled` : ''}`),
    pass('diverged', tick.diverged, (p) => `${p.found} found${p.handed ? `, ${p.handed} forked` : ''}`),
    pass('orphaned', tick.orphaned, (p) => `${p.found} found${p.forked ? `, ${p.forked} forked` : ''}`),
  ];
  return `tick ${tick.tick}/${maxTicks} (${Math.round(tick.durationMs)}ms): ${parts.join('; ')}`;
}
