import { forkDepsFromRuntime } from '../../shared/fork/deps.js';
import { cancelForkedOriginals, forkOrphansToLatest } from '../../shared/fork/orphans.js';
import { repairDiverged } from '../../shared/fork/rewind.js';
import { finishOrphanRewinds } from '../../shared/fork/rewindOrphans.js';
import { repairStuck } from '../../shared/fork/rewindStuck.js';
import { forkStuck } from '../../shared/fork/stuck.js';
import type { ReaperDeps } from '../../shared/reaper/types.js';
import type { Runtime } from '../../shared/runtime.js';

/**
 * Where the fork module plugs into the reaper: diverged workflows go to `autoFork`, and stuck workflows
 * the reaper cancelled under `cancel-and-fork` go to `forkStuck`, and rows of a version no live executor
 * runs go to `forkOrphansToLatest` under ORPHANED_VERSION_POLICY=fork-to-latest (all bounded,
 * deterministic, ledgered).
 */
export function forkHooks(rt: Runtime): Pick<ReaperDeps, 'autoFork' | 'forkStuck' | 'forkOrphans' | 'finishInterruptedForks'> {
  return {
    autoFork: (workflowId) => repairDiverged(forkDepsFromRuntime(rt), workflowId),
    forkStuck: (workflowId) =>
      rt.config.reaper.stuckPolicy === 'cancel-and-repair' ? repairStuck(forkDepsFromRuntime(rt), workflowId) : forkStuck(forkDepsFromRuntime(rt), workflowId),
    forkOrphans: (info) => forkOrphansToLatest(forkDepsFromRuntime(rt), info),
    finishInterruptedForks: async () => [...(await cancelForkedOriginals(forkDepsFromRuntime(rt))), ...(await finishOrphanRewinds(forkDepsFromRuntime(rt)))],
  };
}
