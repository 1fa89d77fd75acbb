import { stillLocked } from '../dbos/recovery.js';
import type { ReaperDeps, ReaperState } from './types.js';

/**
 * Dead executors whose inline recovery left rows another transaction holds (a host lost inside a
 * transaction: its session keeps the row locks for as long as it lives, through a proxy possibly for good).
 * The recovery moved everything else and said `partial`; the reaper remembers the locked rows for the rest
 * of its invocation and asks every tick whether they are free, so they move on the first tick after the
 * transaction ends instead of waiting out the re-declaration interval. Across invocations that interval
 * (REDECLARE_AFTER_MS) still picks them up.
 */
export function rememberLocked(state: ReaperState, executorId: string, workflowIds: string[]): void {
  (state.lockedRows ??= new Map()).set(executorId, workflowIds);
}

export function forgetLocked(state: ReaperState, executorId: string): void {
  state.lockedRows?.delete(executorId);
}

/** Executors whose locked rows are (at least partly) free now; entries with nothing left PENDING are dropped. */
export async function lockedRowsFreed(deps: Pick<ReaperDeps, 'db' | 'config'>, state: ReaperState): Promise<Set<string>> {
  const freed = new Set<string>();
  for (const [executorId, ids] of state.lockedRows ?? []) {
    const now = await stillLocked(deps.db, deps.config.applicationName, executorId, ids);
    if (now.pending === 0) forgetLocked(state, executorId);
    else if (now.locked < now.pending) freed.add(executorId);
  }
  return freed;
}
