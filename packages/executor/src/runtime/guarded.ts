import { withTimeout } from '../lifecycle/orderedShutdown.js';
import type { Logger } from '../log.js';
import type { KitTrouble } from './throttle.js';

/** Nothing in the kit may crash the app: a Postgres, Redis or Pub/Sub failure is logged and bounded. */
export async function guarded<T>(
  log: Logger,
  what: string,
  fn: () => Promise<T>,
  capMs = 5_000,
  trouble?: KitTrouble,
): Promise<T | undefined> {
  try {
    const r = await withTimeout(fn(), capMs);
    trouble?.ok(what);
    return r;
  } catch (err) {
    // A chore that runs every second reports through the kit's throttle (once a minute), never per try.
    if (trouble) trouble.report(what, err);
    else log.warn(`${what} failed (not fatal)`, { err });
    return undefined;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
