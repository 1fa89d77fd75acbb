/**
 * afterlife/fork: bounded, deterministic repair of diverged, stuck and orphaned DBOS workflows: rewind in
 * place (same ID) by default, fork where rewind cannot do it.
 * App code: `getResultWithRepair(client, id)` (`getResultWithAutoFork` is its forking alias). afterlife:
 * `repairDiverged(deps, id)` (which the reaper's diverged pass, shared/reaper/diverged.ts, calls through
 * shared/reaper/deps.ts), `autoFork(deps, id)` for forks, and the orphaned-version handler.
 */
export { autoFork, forkLockKey, type AutoForkResult, type ForkPointOptions, type ForkDeps } from './autoFork.js';
export { lazyDbosClient } from './client.js';
export { type Divergence, divergenceOf, parseDivergence, UNEXPECTED_STEP_CODE } from '../dbos/divergence.js';
export { forkDepsFromRuntime } from './deps.js';
export { getResultWithAutoFork, type AutoForkOptions } from './getResultWithAutoFork.js';
export { DEFAULT_REPAIR_TIMEOUT_MS, ForkBudgetExhaustedError, getResultWithRepair, readStreamWithRepair, type RepairOptions } from './getResultWithRepair.js';
export { repairDiverged, type RepairResult } from './rewind.js';
export { cancelForkedOriginals, forkOrphansToLatest } from './orphans.js';
export type { OrphanInfo, OrphanOutcome } from './orphanOutcome.js';
export { forkStuck } from './stuck.js';
export { ForkConflictError, forkId, forkOnce, planDivergenceFork, type ForkClient, type ForkPlan, type Planned } from './plan.js';
