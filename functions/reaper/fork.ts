import { autoFork } from '../../shared/fork/autoFork.js';
import { forkDepsFromRuntime } from '../../shared/fork/deps.js';
import { forkStuck } from '../../shared/fork/stuck.js';
import type { ReaperDeps } from '../../shared/reaper/types.js';
import type { Runtime } from '../../shared/runtime.js';

/**
 * Where the fork module plugs into the reaper: diverged workflows go to `autoFork`, and stuck workflows
 * the reaper cancelled under `cancel-and-fork` go to `forkStuck` (both bounded, deterministic, ledgered).
 */
export function forkHooks(rt: Runtime): Pick<ReaperDeps, 'autoFork' | 'forkStuck'> {
  return {
    autoFork: (workflowId) => autoFork(forkDepsFromRuntime(rt), workflowId),
    forkStuck: (workflowId) => forkStuck(forkDepsFromRuntime(rt), workflowId),
  };
}
