import type { Db } from '../../packages/executor/src/plane/index.js';
import {
  pruneContext,
  pruneDrainRequests,
  pruneExecutors,
  pruneLineages,
  pruneObservations,
  pruneRecoveries,
  pruneStuck,
  pruneTimelines,
} from '../db/queries/ownTables.js';

/**
 * Retention of afterlife's own tables. The fence (packages/executor/src/contract/fenceCheck.ts) reads the executor's
 * registry row (dead, or a newer incarnation) and its recoveries since the kit started: both are kept at
 * least OWN_KEEP_MIN_MS, so only a process frozen longer than that could wake unfenced by afterlife (DBOS's
 * own owner_xid fencing, 5.2+, still rejects its checkpoints). Each rule keeps what an invariant still needs; docs/retention.md
 * has the table. Rows go only when older than `keepMs` (at least OWN_KEEP_MIN_MS), at most `limit` per
 * table per call, each table in one conditional statement (shared/db/queries/ownTables.ts).
 *
 * - executors + executor_observations: an executor dead or drained for keepMs and owning no PENDING row.
 *   The fence (packages/executor/src/runtime/fence.ts) must find a dead executor that comes back from a freeze, so the
 *   row outlives any plausible zombie (90 days at least), and never goes while DBOS rows still name it
 *   PENDING (recovery must still be able to re-enqueue them as its).
 * - observations without a registry row (executors without the kit): last seen or judged keepMs ago and
 *   owning no PENDING row.
 * - recoveries (+ recovery_batches by cascade) and drain_requests: audit and requests older than keepMs.
 *   A version-wide drain request older than that no longer drains a late starter of that version.
 * - timelines: closed ones declared more than keepMs ago (an open one is closed within its bound first).
 * - stuck_workflows: once DBOS's row of the workflow is gone (retention deleted it).
 * - forks, rewinds and published dead letters: per lineage root, once no member of the lineage (the
 *   root, its forks, its rewound workflows) is left in DBOS's tables. The ledger bounds a lineage's
 *   repairs (MAX_REPAIRS): while any member exists a repair may still count on it; DBOS retention keeps
 *   every member of a lineage while one is unsettled (shared/dbos/retention/predicates.ts), so the ledger goes last.
 *   Unpublished dead letters stay (their message must still go out).
 * - leases and retention_state: one row per name/app; never pruned.
 */
export const OWN_KEEP_MIN_MS = 90 * 24 * 3_600_000;

export interface OwnPruned {
  executors: number;
  observations: number;
  recoveries: number;
  drainRequests: number;
  timelines: number;
  stuck: number;
  lineages: number;
}

export async function pruneOwnTables(db: Db, applicationName: string, keepMs: number, limit: number): Promise<OwnPruned> {
  const q = pruneContext(db, applicationName, Math.max(keepMs, OWN_KEEP_MIN_MS), limit);
  return {
    executors: await pruneExecutors(q),
    observations: await pruneObservations(q),
    recoveries: await pruneRecoveries(q),
    drainRequests: await pruneDrainRequests(q),
    timelines: await pruneTimelines(q),
    stuck: await pruneStuck(q),
    lineages: await pruneLineages(q),
  };
}
