import { autoFork } from '../../shared/fork/autoFork.js';
import { forkDepsFromRuntime } from '../../shared/fork/deps.js';
import type { ReaperDeps } from '../../shared/reaper/types.js';
import type { Runtime } from '../../shared/runtime.js';

/**
 * Where the fork module plugs into the reaper. Diverged workflows go to `autoFork` (bounded lineage,
 * deterministic IDs, dead letter). `forkStuck` — forking a stuck workflow the reaper cancelled under
 * `cancel-and-fork` — is left unwired: the fork module has no entry point for it yet (a stuck workflow is
 * not a divergence, and which version and step it should restart from is a policy decision), so such
 * workflows stay cancelled and reported in `afterlife.stuck_workflows` (`event: stuck_not_forked`).
 */
export function forkHooks(rt: Runtime): Pick<ReaperDeps, 'autoFork' | 'forkStuck'> {
  return { autoFork: (workflowId) => autoFork(forkDepsFromRuntime(rt), workflowId) };
}
