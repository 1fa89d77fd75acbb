import type { TickResult } from '../shared/reaper/types.js';

/** One reaper tick as a progress line: what each pass found or did, and how long the tick took. */
export function tickProgress(tick: TickResult, maxTicks: number): string {
  // Rendered by field name, whatever each pass's outcome shape (a result, an error, a skip).
  const fields = tick as unknown as Record<string, unknown>;
  const pass = (name: string, render: (p: Record<string, unknown>) => string): string => {
    const p = fields[name];
    if (typeof p !== 'object' || p === null) return `${name} -`;
    const r = p as Record<string, unknown>;
    if (typeof r.error === 'string') return `${name} ERROR ${r.error}`;
    if (typeof r.skipped === 'string') return `${name} skipped (${r.skipped})`;
    return `${name} ${render(r)}`;
  };
  const n = (v: unknown) => (typeof v === 'number' ? v : 0);
  const parts = [
    pass('dead', (p) => {
      const declared = Array.isArray(p.declared) ? p.declared.length : 0;
      return `${n(p.candidates)} candidate(s), ${n(p.absent)} absent, ${declared} declared${n(p.reenqueued) ? `, ${n(p.reenqueued)} re-enqueued` : ''}`;
    }),
    pass('stuck', (p) => `${n(p.found)} found${n(p.cancelled) ? `, ${n(p.cancelled)} cancelled` : ''}`),
    pass('diverged', (p) => `${n(p.found)} found${n(p.handed) ? `, ${n(p.handed)} forked` : ''}`),
    pass('orphaned', (p) => `${n(p.found)} found${n(p.forked) ? `, ${n(p.forked)} forked` : ''}`),
  ];
  return `tick ${n(fields.tick)}/${maxTicks} (${Math.round(n(fields.durationMs))}ms): ${parts.join('; ')}`;
}
