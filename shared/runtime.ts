import type { Redis } from 'ioredis';
import { type Config, loadConfig } from './config/index.js';
import { migrate } from './db/migrate.js';
import {
  AfterlifeError,
  createDb,
  createPool,
  createPubSubPublisher,
  createRedis,
  type Db,
  errorMessage,
  type Faults,
  Lifecycle,
  type Logger,
  noFaults,
  type Publisher,
  waitReady,
} from '../packages/executor/src/plane/index.js';
import { checkDbosSchema } from './dbos/schema.js';
import { checkOwnGrants } from './doctor/ownGrants.js';
import { guardDbosSchemaVersion } from './dbos/schemaGuard.js';
import { RedisLock } from './lock/lock.js';
import { pinoConsoleLogger } from './log/pinoLogger.js';

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

/**
 * Builds the runtime. Whatever it opened before a later step failed (the pool before `checkDbosSchema`, a
 * Redis client, the Pub/Sub client) is closed before the error is rethrown: a database without DBOS's
 * schema or grants otherwise leaks a Postgres session and a Redis client per attempt until
 * max_connections takes the user's own app down. The closers join the lifecycle only once the build held.
 */
export async function createRuntime(opts: RuntimeOptions = {}): Promise<Runtime> {
  const config = loadConfig(opts.env ?? process.env);
  const env = opts.env ?? process.env;
  // Error Reporting groups by service and version: Cloud Run's K_SERVICE / K_REVISION name them.
  const logger =
    opts.logger ??
    pinoConsoleLogger({ component: 'afterlife' }, config.logLevel, {
      serviceContext: { service: env.K_SERVICE || 'afterlife', version: env.K_REVISION || undefined },
      labels: { 'afterlife-app': config.applicationName },
    });
  // A threshold below its floor runs only because the operator said so; every start says it again.
  for (const line of config.belowFloor) logger.warn(line, { event: 'threshold_below_floor' });
  const lifecycle = opts.lifecycle ?? new Lifecycle();
  const faults = opts.faults ?? noFaults;
  const opened: Array<{ name: string; close: () => Promise<unknown> }> = [];

  try {
    const { pool, close } = await createPool(config, logger, opts.sessionName ?? 'afterlife');
    opened.push({ name: 'postgres', close });
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
      opened.push({ name: 'redis', close: () => client.quit().catch(() => client.disconnect()) });
      if (!(await waitReady(client, 1_000))) logger.warn('redis not reachable yet; running degraded until it is', { redis: 'unavailable' });
    } else {
      logger.warn('REDIS_URL is not set: degraded mode (no locks, no heartbeats)');
    }

    let publisher: Publisher | undefined;
    if (opts.publisher === 'pubsub') publisher = deferredPublisher(() => createPubSubPublisher(config.project));
    else if (opts.publisher && opts.publisher !== 'none') publisher = opts.publisher;
    if (publisher) {
      const p = publisher;
      opened.push({ name: 'pubsub', close: () => p.close() });
    }

    await checkDbosSchema(db);
    await guardDbosSchemaVersion(db, config.dbosSchemaMaxVersion);
    if (opts.migrate !== false) {
      const { applied } = await migrate(db);
      if (applied.length) logger.info('applied afterlife migrations', { applied });
    }
    // After migrate, so afterlife's own tables are there to be checked; a failure to ask is not a start failure.
    await checkOwnGrants(db, logger, env.FUNCTION_TARGET).catch((err: unknown) => logger.debug('grant check failed', { err }));
    for (const o of opened) lifecycle.onShutdown(o.name, o.close);
    return { config, db, redis, lock, publisher, logger, faults, lifecycle, clock: Date.now };
  } catch (err) {
    // Reverse order: Pub/Sub and Redis first, the pool last (nothing else holds it yet).
    for (const o of opened.reverse()) await o.close().catch(() => undefined);
    throw err;
  }
}

/**
 * The Pub/Sub client is loaded on the first publish, not in the build: importing @google-cloud/pubsub (gRPC,
 * auth) is most of a cold build, and executorDeath, which answers the first delivery of a cold instance,
 * never publishes a death notice.
 */
function deferredPublisher(create: () => Promise<Publisher>): Publisher {
  let real: Promise<Publisher> | undefined;
  const get = () => {
    real ??= create().catch((err: unknown) => {
      real = undefined;
      throw err;
    });
    return real;
  };
  return {
    publish: async (topic, json, attributes, orderingKey) => (await get()).publish(topic, json, attributes, orderingKey),
    close: async () => {
      if (real) await (await real.catch(() => undefined))?.close();
    },
  };
}

/** Why the runtime is not there, as the HTTP body and log fields say it. Never carries a secret. */
export class RuntimeUnavailableError extends AfterlifeError {
  constructor(
    readonly underlying: unknown,
    readonly retryInMs: number,
  ) {
    super(`afterlife could not start: ${errorMessage(underlying)}`, startFailureCode(underlying), 'retry', { cause: underlying });
  }
}

export function startFailureCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Za-z0-9_]{1,40}$/.test(code) ? code : 'runtime_unavailable';
}

export interface LazyRuntimeOptions {
  /** First wait after a failed build; doubles per consecutive failure up to `maxBackoffMs`. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  clock?: () => number;
  /** Called once per failed build (not per request): the one ERROR line and its metric. */
  onFailure?: (err: unknown, retryInMs: number, attempt: number) => void;
}

/**
 * One lazily-built Runtime per function instance. A failed build is not retried by every request: until
 * its backoff has passed, callers get the same RuntimeUnavailableError at once (503 / nack), so a broken
 * database costs one connection attempt per backoff step, not one per request.
 */
export function lazyRuntime(build: () => Promise<Runtime>, o: LazyRuntimeOptions = {}): () => Promise<Runtime> {
  const initial = o.initialBackoffMs ?? 1_000;
  const max = o.maxBackoffMs ?? 30_000;
  const clock = o.clock ?? Date.now;
  let pending: Promise<Runtime> | undefined;
  let failure: { error: RuntimeUnavailableError; until: number } | undefined;
  let failures = 0;
  return () => {
    if (pending) return pending;
    if (failure && clock() < failure.until) {
      const left = failure.until - clock();
      return Promise.reject(new RuntimeUnavailableError(failure.error.underlying, left));
    }
    const attempt = build().then(
      (rt) => {
        failures = 0;
        failure = undefined;
        return rt;
      },
      (err: unknown) => {
        failures += 1;
        const wait = Math.min(max, initial * 2 ** (failures - 1));
        const error = new RuntimeUnavailableError(err, wait);
        failure = { error, until: clock() + wait };
        pending = undefined;
        o.onFailure?.(err, wait, failures);
        throw error;
      },
    );
    pending = attempt;
    // The eager build at module load has no caller yet: its rejection is reported by onFailure.
    attempt.catch(() => undefined);
    return attempt;
  };
}
