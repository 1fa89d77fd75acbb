import type { Redis } from 'ioredis';
import { type Config, loadConfig } from '../../shared/config/index.js';
import type { Db } from '../../packages/executor/src/db/pool.js';
import type { Publisher } from '../../packages/executor/src/events/publisher.js';
import { Lifecycle } from '../../packages/executor/src/lifecycle/orderedShutdown.js';
import { RedisLock } from '../../shared/lock/lock.js';
import { createRedis } from '../../packages/executor/src/lock/redis.js';
import { memoryLogger } from '../../packages/executor/src/log.js';
import type { Runtime } from '../../shared/runtime.js';
import { noFaults, type Faults } from '../../packages/executor/src/testing/faults.js';
import { afterlifeDb } from './db.js';
import { TEST_REDIS_URL } from './services.js';

/** A Runtime over real services for one test, with its logger's lines kept for assertions. */
export function testRuntime(o: {
  databaseUrl: string;
  applicationName: string;
  env?: Record<string, string>;
  redis?: Redis | 'none';
  redisUrl?: string;
  faults?: Faults;
  publisher?: Publisher;
  poolMax?: number;
  db?: Db;
}): Runtime & { logger: ReturnType<typeof memoryLogger>; close: () => Promise<void> } {
  const redisUrl = o.redisUrl ?? TEST_REDIS_URL;
  const config: Config = loadConfig({
    DATABASE_URL: o.databaseUrl,
    DBOS_APPLICATION_NAME: o.applicationName,
    ...(o.redis === 'none' ? {} : { REDIS_URL: redisUrl }),
    ...(o.poolMax ? { DB_POOL_MAX: String(o.poolMax) } : {}),
    ...o.env,
  });
  const logger = memoryLogger({ test: true });
  const lifecycle = new Lifecycle();
  const db = o.db ?? afterlifeDb(o.databaseUrl, { max: config.database.poolMax, ...(o.faults ? { faults: o.faults } : {}) });
  const redis = o.redis === 'none' ? undefined : (o.redis ?? createRedis(redisUrl));
  const ownsRedis = o.redis === undefined;
  return {
    config,
    db,
    redis,
    lock: redis ? new RedisLock(redis) : undefined,
    publisher: o.publisher,
    logger,
    faults: o.faults ?? noFaults,
    lifecycle,
    clock: Date.now,
    close: async () => {
      await lifecycle.shutdown();
      if (!o.db) await db.end();
      if (ownsRedis && redis) redis.disconnect();
    },
  };
}
