/**
 * afterlife/fork: bounded, deterministic auto-fork of diverged DBOS workflows.
 * App code: `getResultWithAutoFork(client, id, { maxForks })`. afterlife: `autoFork(deps, id)` (which the
 * reaper's diverged pass, shared/reaper/diverged.ts, calls through functions/reaper/fork.ts), and the
 * `fork-to-latest` orphaned-version handler.
 */
export { autoFork, forkLockKey, type AutoForkResult, type ForkPointOptions, type ForkDeps } from './autoFork.js';
export { lazyDbosClient } from './client.js';
export { type Divergence, divergenceOf, parseDivergence, UNEXPECTED_STEP_CODE } from './detect.js';
export { forkDepsFromRuntime } from './deps.js';
export { ForkBudgetExhaustedError, getResultWithAutoFork, type AutoForkOptions } from './getResultWithAutoFork.js';
export { cancelForkedOriginals, forkOrphansToLatest, type OrphanInfo, type OrphanOutcome } from './orphans.js';
export { forkStuck } from './stuck.js';
export { ForkConflictError, forkId, forkOnce, planDivergenceFork, type ForkClient, type ForkPlan, type Planned } from './plan.js';
