/**
 * `afterlife-executor/repair` (in the kit's dual package, so CommonJS and ESM apps install and import
 * it; the root package's `afterlife-plane/repair` exports it too): what app code
 * needs to live with afterlife's repairs of diverged workflows. `getResultWithRepair(client, id)` awaits a
 * result through a rewind or a fork, `readStreamWithRepair` reads a stream on through a rewind, and
 * `getResultWithAutoFork` (with ForkBudgetExhaustedError) is the earlier, forking helper. Only these: the
 * repairs themselves (shared/repair/situations, the plane) run in the reaper, executorDeath and the CLI, which import
 * them by path. test/unit/publicApi.test.ts holds the list, so an export cannot be added by accident.
 * @module
 */

export { getResultWithAutoFork, type AutoForkOptions } from './getResultWithAutoFork.js';
export { ForkBudgetExhaustedError, getResultWithRepair, readStreamWithRepair, type RepairOptions } from './getResultWithRepair.js';
export type { ForkClient, TargetVersion } from './primitives/lineage.js';
