import type { Redis } from 'ioredis';
import type { Config } from '../config/index.js';
import type { Db, Faults, Logger } from '../../packages/executor/src/plane/index.js';
import type { RedisLock } from '../lock/lock.js';
import { repairDepsFromRuntime } from '../repair/deps.js';
import { repairOrphaned } from '../repair/situations/orphaned.js';
import type { Runtime } from '../runtime.js';
import type { RecoveryDeps } from './recoverExecutor.js';

/**
 * A recovery's dependencies, assembled in one place for its three callers (executorDeath, the reaper's
 * inline recovery, `afterlife-plane recover`), so the settings it reads and the hooks it gets cannot drift
 * apart between them. Which hooks each caller gets is decided here, in `hooks` below.
 */
export interface RecoverySource {
  config: Config;
  db: Db;
  /** Redis and its lock as the caller can use them (the CLI passes neither when Redis did not answer). */
  redis: Redis | undefined;
  lock: RedisLock | undefined;
  logger: Logger;
  faults?: Faults;
  clock: () => number;
}

/** Who runs the recovery. */
export type RecoveryCaller =
  /** A death notice: the runtime builds the repair the orphaned-version hook runs. */
  | { via: 'executorDeath'; runtime: Runtime }
  /** The reaper's inline recovery and the CLI; `recoveredBy` names them in the audit. */
  | { via: 'reaper' | 'cli'; recoveredBy: string };

export function recoveryDeps(src: RecoverySource, caller: RecoveryCaller): RecoveryDeps {
  const { config } = src;
  return {
    db: src.db,
    redis: src.redis,
    lock: src.lock,
    logger: src.logger,
    clock: src.clock,
    ...(src.faults ? { faults: src.faults } : {}),
    batchSize: config.recovery.batchSize,
    lockTtlMs: config.recovery.lockTtlMs,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    orphanedVersions: { policy: config.recovery.orphanedVersionPolicy, graceMs: config.reaper.orphanedVersionGraceMs },
    ...(config.redis ? { keyPrefix: config.redis.keyPrefix } : {}),
    ...(caller.via === 'executorDeath' ? {} : { recoveredBy: caller.recoveredBy }),
    ...hooks(src, caller),
  };
}

/**
 * The orphaned-version hook (ORPHANED_VERSION_POLICY=fork-to-latest: repair rows of a version no live
 * executor runs onto the latest, at once) goes on executorDeath's recoveries only, on purpose:
 * - the reaper's inline recovery is time-boxed inside a tick (INLINE_RECOVERY_BUDGET_MS) and the repair is
 *   not (a DBOS client, reads and a fork or rewind per row); the reaper's own orphaned-versions pass runs
 *   the same repair on the same rows once they have waited ORPHANED_VERSION_GRACE_MS;
 * - `afterlife-plane recover` re-enqueues, which is what the operator asked for, without opening a DBOS client
 *   from a laptop; it warns about the stranded versions and the reaper's pass repairs them after the grace.
 * Either way every path ends with the same policy applied; only executorDeath applies it without the grace.
 */
function hooks(src: RecoverySource, caller: RecoveryCaller): Pick<RecoveryDeps, 'onOrphanedVersion'> {
  if (caller.via !== 'executorDeath' || src.config.recovery.orphanedVersionPolicy !== 'fork-to-latest') return {};
  const { runtime } = caller;
  return { onOrphanedVersion: async (info) => void (await repairOrphaned(repairDepsFromRuntime(runtime, { logger: src.logger }), info)) };
}
