import type { Logger } from '../log.js';
import { LogThrottle } from '../logThrottle.js';

export { LogThrottle };

/** Postgres says a relation or schema is missing: afterlife's schema was never migrated into this database. */
export function isMissingSchema(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return code === '42P01' || code === '3F000';
}

/** What the kit says about its own database trouble, once a minute per kind. */
export const TROUBLE_WINDOW_MS = 60_000;

export class KitTrouble {
  private readonly throttle: LogThrottle;

  constructor(
    private readonly log: Logger,
    private readonly afterlifeSchema: string,
    windowMs = TROUBLE_WINDOW_MS,
  ) {
    this.throttle = new LogThrottle(windowMs);
  }

  /**
   * A failure of one of the kit's Postgres chores. A missing afterlife schema is one ERROR line for the whole
   * kit, saying what to run and that the process is not protected meanwhile; anything else is a WARNING per
   * chore. Either at most once a window.
   */
  report(what: string, err: unknown, detail: Record<string, unknown> = {}): void {
    if (isMissingSchema(err)) {
      const p = this.throttle.pass('schema');
      if (!p.log) return;
      this.log.error(
        `afterlife's schema "${this.afterlifeSchema}" is missing from this database: this process is NOT protected ` +
          `(no liveness lease, no fencing, no registry, no drain requests). Run \`afterlife-plane migrate\` (the recovery plane's CLI) against it ` +
          `(the plane's DATABASE_URL); the kit picks the schema up by itself once it exists`,
        {
          event: 'afterlife_schema_missing',
          schema: this.afterlifeSchema,
          repeatsAtMostEveryMs: TROUBLE_WINDOW_MS,
          suppressed: p.suppressed,
        },
      );
      return;
    }
    const p = this.throttle.pass(what);
    if (p.log)
      this.log.warn(`${what} failed (not fatal); retrying`, {
        err,
        ...detail,
        suppressed: p.suppressed,
        repeatsAtMostEveryMs: TROUBLE_WINDOW_MS,
      });
  }

  /** The chore works again (a later failure is news, logged at once). */
  ok(what: string): void {
    this.throttle.clear(what);
    this.throttle.clear('schema');
  }
}
