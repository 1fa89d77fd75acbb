import type { Fields, Logger } from '../shared/log.js';
import type { Faults } from '../shared/testing/faults.js';

/**
 * Progress for long CLI operations, taken from what the shared modules already expose rather than from
 * hooks added to them: the reaper logs one `reaper_tick` line per tick through the logger it is given,
 * and recovery calls its `faults` dependency after every batch ('recover.afterBatch').
 */

/**
 * `inner`, plus `onEvent` for every line that carries an `event` field, whatever its severity: the CLI's
 * own logger prints only errors unless --verbose, and progress must not depend on that.
 */
export function observingLogger(inner: Logger, onEvent: (event: string, fields: Fields) => void, base: Fields = {}): Logger {
  const at =
    (level: 'debug' | 'info' | 'notice' | 'warn' | 'error') =>
    (message: string, fields: Fields = {}): void => {
      inner[level](message, fields);
      const all = { ...base, ...fields };
      if (typeof all.event === 'string') {
        try {
          onEvent(all.event, all);
        } catch {
          // Progress is best effort: a rendering bug must never fail the operation it reports on.
        }
      }
    };
  return {
    debug: at('debug'),
    info: at('info'),
    notice: at('notice'),
    warn: at('warn'),
    error: at('error'),
    child: (fields) => observingLogger(inner.child(fields), onEvent, { ...base, ...fields }),
  };
}

/**
 * A Faults that injects nothing and only watches one point. The fault points are the shared modules'
 * named boundaries (shared/testing/faults.ts); recovery's batch boundary is the only per-batch signal it
 * exposes, and watching it costs one call per batch.
 */
export function watchPoint(point: string, onHit: (ctx: Record<string, unknown>) => void): Faults {
  return {
    enabled: true,
    hit: (p, ctx = {}) => {
      if (p !== point) return undefined;
      try {
        onHit(ctx);
      } catch {
        // As above: progress never fails the recovery.
      }
      return undefined;
    },
  };
}

/** One reaper tick as a progress line: what each pass found or did, and how long the tick took. */
export function tickProgress(fields: Fields, maxTicks: number): string {
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
