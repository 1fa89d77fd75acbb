import { withTimeout } from '../lifecycle/shutdown.js';
import type { Logger } from '../log.js';

/** Nothing in the kit may crash the app: a Postgres, Redis or Pub/Sub failure is logged and bounded. */
export async function guarded<T>(log: Logger, what: string, fn: () => Promise<T>, capMs = 5_000): Promise<T | undefined> {
  try {
    return await withTimeout(fn(), capMs);
  } catch (err) {
    log.warn(`${what} failed (not fatal)`, { err });
    return undefined;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
