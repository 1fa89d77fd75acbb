import { hostname } from 'node:os';
import { forkDepsFromRuntime } from '../fork/deps.js';
import { cancelForkedOriginals, forkOrphansToLatest } from '../fork/orphans.js';
import { repairDiverged } from '../fork/rewind.js';
import { finishOrphanRewinds } from '../fork/rewindOrphans.js';
import { repairStuck } from '../fork/rewindStuck.js';
import { forkStuck } from '../fork/stuck.js';
import type { Logger } from '../log.js';
import type { Runtime } from '../runtime.js';
import type { ReaperDeps } from './types.js';

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

/**
 * The reaper's dependencies from a runtime, in one place for both entry points (the reaper function and
 * `afterlife reap`), so the CLI does not import the function and both get the same hooks.
 */
export function reaperDeps(rt: Runtime, logger: Logger = rt.logger): ReaperDeps {
  return {
    config: rt.config,
    db: rt.db,
    redis: rt.redis,
    lock: rt.lock,
    publisher: rt.publisher,
    logger,
    faults: rt.faults,
    clock: rt.clock,
    detectedBy: `reaper@${hostname()}:${process.pid}`,
    ...forkHooks(rt),
  };
}
