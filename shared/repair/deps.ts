import type { Runtime } from '../runtime.js';
import type { RepairDeps } from './primitives/deps.js';
import { lazyDbosClient } from './client.js';

/**
 * RepairDeps from a Runtime, with one lazily-created DBOSClient per Runtime (closed by its lifecycle), so
 * every handler of an instance shares it.
 */
const clients = new WeakMap<Runtime, RepairDeps['dbos']>();

export function repairDepsFromRuntime(rt: Runtime, overrides: Partial<RepairDeps> = {}): RepairDeps {
  let dbos = clients.get(rt);
  if (!dbos) {
    dbos = lazyDbosClient(rt.config, rt.logger, rt.lifecycle);
    clients.set(rt, dbos);
  }
  return {
    db: rt.db,
    dbos,
    lock: rt.lock,
    publisher: rt.publisher,
    logger: rt.logger,
    faults: rt.faults,
    applicationName: rt.config.applicationName,
    deadLetterTopic: rt.config.topics.deadLetters,
    maxForks: rt.config.repair.maxRepairs,
    targetVersion: rt.config.repair.targetVersion,
    repairMode: rt.config.repair.mode,
    dataSourceSchemas: rt.config.repair.dataSourceSchemas,
    lockTtlMs: rt.config.recovery.lockTtlMs,
    ...(rt.config.redis ? { keyPrefix: rt.config.redis.keyPrefix } : {}),
    ...overrides,
  };
}
