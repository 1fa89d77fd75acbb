import type { RepairDeps } from '../primitives/deps.js';
import { cancelForkedOriginals, forkOrphans } from './orphanedFork.js';
import { finishOrphanRewinds, rewindOrphans } from './orphanedRewind.js';
import type { OrphanInfo, OrphanOutcome } from './orphanOutcome.js';

/**
 * ORPHANED_VERSION_POLICY=fork-to-latest: recovery re-enqueued rows of a version no live executor runs, so
 * they would wait forever (DBOS claims a row only on its exact version). Each is moved onto the latest
 * version from after its last checkpoint, so that a live executor runs it and no executor of the old
 * version ever runs it a second time.
 *
 * repairOrphaned is the one place that chooses: under REPAIR_MODE=rewind (the default) each row is
 * cancelled and rewound in place under its own ID (orphanedRewind.ts); the rows a rewind cannot take
 * (data-source checkpoints at or past the cut, a DBOS without rewind) and every row under REPAIR_MODE=fork
 * are forked, their originals cancelled (orphanedFork.ts).
 */
export async function repairOrphaned(deps: RepairDeps, info: OrphanInfo): Promise<OrphanOutcome[]> {
  const client = await deps.dbos();
  const log = deps.logger.child({ component: 'fork', policy: 'fork-to-latest', executorId: info.executorId });
  const latest = (await client.getLatestApplicationVersion()).versionName;
  if (latest === info.applicationVersion) {
    log.warn('orphaned version is the latest: nothing newer to fork onto', { applicationVersion: latest });
    return info.workflowIds.map((workflowId) => ({ workflowId, outcome: 'skipped', why: 'version is the latest' }));
  }
  if ((deps.repairMode ?? 'rewind') === 'fork') return forkOrphans(deps, client, info, latest, log);
  const { outcomes, fallback } = await rewindOrphans(deps, client, info, latest, log);
  if (fallback.length) outcomes.push(...(await forkOrphans(deps, client, { ...info, workflowIds: fallback }, latest, log)));
  log.notice('orphaned-version workflows rewound onto the latest version', {
    event: 'orphaned_version_forked',
    applicationVersion: info.applicationVersion,
    latest,
    rewound: outcomes.filter((o) => o.outcome === 'rewound').length,
    total: info.workflowIds.length,
  });
  return outcomes;
}

/**
 * Finishes orphaned-version repairs a process left half-done (a fork whose original was never cancelled,
 * a rewind claimed and never made); the reaper calls it each orphaned-versions pass. The workflow IDs
 * finished.
 */
export async function finishInterruptedOrphanRepairs(deps: RepairDeps): Promise<string[]> {
  return [...(await cancelForkedOriginals(deps)), ...(await finishOrphanRewinds(deps))];
}
