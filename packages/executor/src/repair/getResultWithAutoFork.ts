import { getResultWithRepair, type RepairOptions } from './getResultWithRepair.js';
import type { ForkClient } from './primitives/lineage.js';

/**
 * The earlier name of getResultWithRepair, kept for apps that call it: it forks by itself on a divergence
 * (`repair: 'fork'`) and follows forks, exactly as before repair in place existed. New code should call
 * getResultWithRepair, which also waits through afterlife's rewinds.
 */
export { ForkBudgetExhaustedError } from './getResultWithRepair.js';
export type AutoForkOptions = Omit<RepairOptions, 'repair'>;

export function getResultWithAutoFork<R>(client: ForkClient, workflowId: string, opts: AutoForkOptions = {}): Promise<R> {
  return getResultWithRepair<R>(client, workflowId, { ...opts, repair: 'fork' });
}
