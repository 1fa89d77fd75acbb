import { hostname } from 'node:os';
import { repairDepsFromRuntime } from '../repair/deps.js';
import { repairDiverged } from '../repair/situations/diverged.js';
import { finishInterruptedOrphanRepairs, repairOrphaned } from '../repair/situations/orphaned.js';
import { repairStuck } from '../repair/situations/stuck.js';
import type { Logger } from '../../packages/executor/src/plane/index.js';
import type { Runtime } from '../runtime.js';
import type { ReaperDeps } from './types.js';

/**
 * Where the repair module plugs into the reaper: diverged workflows go to `repairDiverged`, stuck workflows
 * the reaper cancelled go to `repairStuck` (rewind-or-fork under `cancel-and-repair`, a fork under
 * `cancel-and-fork`), and rows of a version no live executor runs go to `repairOrphaned` under
 * ORPHANED_VERSION_POLICY=fork-to-latest (all bounded, deterministic, ledgered).
 */
export function repairHooks(rt: Runtime): Pick<ReaperDeps, 'repairDiverged' | 'repairStuck' | 'repairOrphaned' | 'finishInterruptedForks'> {
  return {
    repairDiverged: (workflowId) => repairDiverged(repairDepsFromRuntime(rt), workflowId),
    repairStuck: (workflowId) => repairStuck(repairDepsFromRuntime(rt), workflowId, rt.config.reaper.stuckPolicy),
    repairOrphaned: (info) => repairOrphaned(repairDepsFromRuntime(rt), info),
    finishInterruptedForks: () => finishInterruptedOrphanRepairs(repairDepsFromRuntime(rt)),
  };
}

/**
 * The reaper's dependencies from a runtime, in one place for both entry points (the reaper function and
 * `afterlife-plane reap`), so the CLI does not import the function and both get the same hooks.
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
    ...repairHooks(rt),
  };
}
