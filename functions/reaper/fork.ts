import type { ReaperDeps } from '../../shared/reaper/types.js';
import type { Runtime } from '../../shared/runtime.js';

/**
 * Where the fork module (shared/fork, issue #5) plugs into the reaper. Until it is merged this returns
 * nothing: diverged workflows are reported and stuck ones (with `cancel-and-fork`) are only cancelled.
 * Wiring it is one line each, e.g. `autoFork: (id) => autoFork(forkDeps(rt), id)`.
 */
export function forkHooks(_rt: Runtime): Pick<ReaperDeps, 'autoFork' | 'forkStuck'> {
  return {};
}
