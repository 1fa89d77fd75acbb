/**
 * At most one log line per key per window: a kit that cannot reach its database or finds afterlife's
 * schema missing must say so clearly without flooding the app's log (446 lines in 28 s). The
 * first occurrence is logged at once; later ones in the window are counted and the count rides on the next
 * line that is let through.
 */
export class LogThrottle {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether to log now, and how many were held back since the last line of this key. */
  pass(key: string): { log: true; suppressed: number } | { log: false } {
    const t = this.now();
    const seen = this.last.get(key);
    if (seen && t - seen.at < this.windowMs) {
      seen.suppressed += 1;
      return { log: false };
    }
    this.last.set(key, { at: t, suppressed: 0 });
    return { log: true, suppressed: seen?.suppressed ?? 0 };
  }

  /** A key whose trouble is over: its next occurrence is logged at once. */
  clear(key: string): void {
    this.last.delete(key);
  }
}
