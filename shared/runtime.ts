import type { Redis } from 'ioredis';
import { type Config, loadConfig } from './config/index.js';
import { migrate } from './db/migrate.js';
import { createDb, createPool, type Db } from './db/pool.js';
import { checkDbosSchema } from './dbos/schema.js';
import { guardDbosSchemaVersion } from './dbos/schemaGuard.js';
import { createPubSubPublisher, type Publisher } from './events/publisher.js';
import { Lifecycle } from './lifecycle/shutdown.js';
import { RedisLock } from './lock/lock.js';
import { createRedis, waitReady } from './lock/redis.js';
import { consoleLogger, type Logger } from './log.js';
import { noFaults, type Faults } from './testing/faults.js';

/**
 * Everything a handler needs, built once per instance and passed in. Handlers never reach for globals;
 * tests build a Runtime from their own env, pool and fault injector.
 */
export interface Runtime {
  config: Config;
  db: Db;
  redis: Redis | undefined;
  lock: RedisLock | undefined;
  publisher: Publisher | undefined;
  logger: Logger;
  faults: Faults;
  lifecycle: Lifecycle;
  clock: () => number;
}

export interface RuntimeOptions {
  env?: Record<string, string | undefined>;
  logger?: Logger;
  faults?: Faults;
  /** Publishing is optional (executor-death never publishes); when absent, publishing callers degrade. */
  publisher?: Publisher | 'pubsub' | 'none';
  lifecycle?: Lifecycle;
  /** Postgres application_name of our sessions. */
  sessionName?: string;
  migrate?: boolean;
}

export async function createRuntime(opts: RuntimeOptions = {}): Promise<Runtime> {
  const config = loadConfig(opts.env ?? process.env);
  const logger = opts.logger ?? consoleLogger({ component: 'afterlife' }, config.logLevel);
  const lifecycle = opts.lifecycle ?? new Lifecycle();
  const faults = opts.faults ?? noFaults;

  const { pool, close } = await createPool(config, logger, opts.sessionName ?? 'afterlife');
  lifecycle.onShutdown('postgres', close);
  const db = createDb(pool, config.database.poolMax, {
    dbosSchema: config.dbosSchema,
    afterlifeSchema: config.afterlifeSchema,
    logger,
    faults,
  });

  let redis: Redis | undefined;
  let lock: RedisLock | undefined;
  if (config.redis) {
    const client = createRedis(config.redis.url, { tlsCa: config.redis.tlsCa });
    redis = client;
    lock = new RedisLock(client, { owner: opts.sessionName ?? 'afterlife' });
    lifecycle.onShutdown('redis', () => client.quit().catch(() => client.disconnect()));
    if (!(await waitReady(client, 1_000))) logger.warn('redis not reachable yet; running degraded until it is', { redis: 'unavailable' });
  } else {
    logger.warn('REDIS_URL is not set: degraded mode (no locks, no heartbeats)');
  }

  let publisher: Publisher | undefined;
  if (opts.publisher === 'pubsub') publisher = await createPubSubPublisher(config.project);
  else if (opts.publisher && opts.publisher !== 'none') publisher = opts.publisher;
  if (publisher) {
    const p = publisher;
    lifecycle.onShutdown('pubsub', () => p.close());
  }

  await checkDbosSchema(db);
  await guardDbosSchemaVersion(db, config.dbosSchemaMaxVersion);
  if (opts.migrate !== false) {
    const { applied } = await migrate(db);
    if (applied.length) logger.info('applied afterlife migrations', { applied });
  }
  return { config, db, redis, lock, publisher, logger, faults, lifecycle, clock: Date.now };
}

/** One lazily-built Runtime per function instance; a failed build is retried by the next invocation. */
export function lazyRuntime(build: () => Promise<Runtime>): () => Promise<Runtime> {
  let pending: Promise<Runtime> | undefined;
  return () => {
    pending ??= build();
    pending.catch(() => {
      pending = undefined;
    });
    return pending;
  };
}
