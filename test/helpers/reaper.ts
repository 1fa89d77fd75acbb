import { reaperDeps } from '../../functions/reaper/handle.js';
import type { ReaperDeps } from '../../shared/reaper/types.js';
import type { Runtime } from '../../shared/runtime.js';

/** Reaper dependencies over a test Runtime, named so the audit shows the test as the detector. */
export function testReaperDeps(rt: Runtime, overrides: Partial<ReaperDeps> = {}): ReaperDeps {
  return { ...reaperDeps(rt), detectedBy: 'reaper-test', ...overrides };
}

/** Env for a fast reaper: tick 1 s, heartbeat TTL 3 s (acceptance A's numbers). */
export const FAST_REAPER_ENV = {
  HEARTBEAT_TTL_MS: '3000',
  REAPER_TICK_MS: '1000',
  BUDGET_MARGIN_MS: '1000',
};
