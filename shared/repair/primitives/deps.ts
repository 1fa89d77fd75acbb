import type { Db, Faults, ForkClient, Logger, Publisher, TargetVersion } from '../../../packages/executor/src/plane/index.js';
import type { RedisLock } from '../../lock/lock.js';

/**
 * What every repair is given: the databases and DBOS's client it acts through, the lock and publisher it
 * may lack, and the settings that bound it (MAX_REPAIRS, the target version, REPAIR_MODE). Built from a
 * Runtime by shared/repair/deps.ts; tests build their own.
 */
export interface RepairDeps {
  db: Db;
  /** DBOS's own client, created on first use; each call borrows a connection and gives it back. */
  dbos: () => Promise<ForkClient>;
  lock: RedisLock | undefined;
  publisher: Publisher | undefined;
  logger: Logger;
  faults?: Faults;
  applicationName: string;
  deadLetterTopic: string;
  /** MAX_REPAIRS: rewinds and forks per lineage, then the dead letter. */
  maxForks: number;
  targetVersion: TargetVersion;
  /** REPAIR_MODE: rewind in place (DBOSClient.rewindWorkflow, in 5.2.11 and 5.3.0) or fork. */
  repairMode?: 'rewind' | 'fork';
  /** Schemas holding DBOS data-source checkpoints (transaction_completion) afterlife can read. */
  dataSourceSchemas?: readonly string[];
  /** A rewind claim older than this whose rewind never happened (its claimer died) may be taken over. */
  rewindClaimMs?: number;
  lockTtlMs: number;
  keyPrefix?: string;
  /** Who forks, for the ledger. */
  forkedBy?: string;
  /** A dead letter whose publish claim is older than this may be re-published by a retry. */
  deadLetterClaimMs?: number;
}
