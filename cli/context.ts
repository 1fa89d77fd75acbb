import type { Redis } from 'ioredis';
import { type Config, loadConfig } from '../shared/config/index.js';
import {
  createDb,
  createPool,
  createPubSubPublisher,
  createRedis,
  type Db,
  formatLogLine,
  Lifecycle,
  type Logger,
  makeLogger,
  noFaults,
  type Publisher,
  waitReady,
} from '../packages/executor/src/plane/index.js';
import { RedisLock } from '../shared/lock/lock.js';
import type { Runtime } from '../shared/runtime.js';
import { inline } from './format.js';

/**
 * What a CLI command works with: the same config, pool and Redis client the functions use, built from
 * the environment. Logs go to stderr (stdout is the command's output, JSON with --json).
 */
export interface CliContext {
  config: Config;
  db: Db;
  redis: Redis | undefined;
  /** Redis configured but not answering: commands say so and carry on degraded. */
  redisReady: boolean;
  lock: RedisLock | undefined;
  logger: Logger;
  json: boolean;
  /**
   * The same Runtime a function instance has (so the reaper and fork modules get their deps exactly as the
   * functions build them), with the publisher created on first use; undefined without a project, emulator
   * or local bridge. Redis that did not answer is left out (degraded), as a function would run.
   */
  runtime(): Promise<Runtime>;
  /** A progress line on stderr (never on stdout, so --json output stays one document). */
  progress(line: string): void;
  close(): Promise<void>;
}

/**
 * The CLI's own log lines on stderr (all of them with --verbose, errors only otherwise), through
 * formatLogLine: the same credential mask and error serialiser as the functions' logs.
 */
export function cliLogger(verbose: boolean, write: (s: string) => void = (s) => void process.stderr.write(s)): Logger {
  return makeLogger((line) => write(`${formatLogLine(line)}\n`), { component: 'afterlife-cli' }, verbose ? 'DEBUG' : 'ERROR');
}

export async function createContext(o: {
  env: Record<string, string | undefined>;
  app?: string;
  json: boolean;
  verbose: boolean;
}): Promise<CliContext> {
  const config = loadConfig({ ...o.env, ...(o.app ? { DBOS_APPLICATION_NAME: o.app } : {}) });
  const logger = cliLogger(o.verbose);
  // The CLI logs errors only; a threshold below its floor is said on stderr whatever the verbosity.
  for (const line of config.belowFloor) process.stderr.write(`afterlife: WARNING ${inline(line)}\n`);
  const { pool, close: closePool } = await createPool(config, logger, 'afterlife-cli');
  const db = createDb(pool, config.database.poolMax, {
    dbosSchema: config.dbosSchema,
    afterlifeSchema: config.afterlifeSchema,
    logger,
    // A CLI waits its turn rather than failing fast like a function instance.
    budgetWaitMs: 30_000,
  });
  let redis: Redis | undefined;
  let redisReady = false;
  if (config.redis) {
    redis = createRedis(config.redis.url, { tlsCa: config.redis.tlsCa });
    redisReady = await waitReady(redis, 1_500);
  }
  const lifecycle = new Lifecycle();
  let runtime: Promise<Runtime> | undefined;
  return {
    config,
    db,
    redis,
    redisReady,
    lock: redis ? new RedisLock(redis, { owner: 'afterlife-cli' }) : undefined,
    logger,
    json: o.json,
    runtime: () => {
      runtime ??= (async () => {
        let publisher: Publisher | undefined;
        // Without a project (or a local emulator / bridge) there is nowhere to publish: callers degrade.
        if (config.project || o.env.PUBSUB_EMULATOR_HOST || o.env.PUBSUB_BRIDGE_URL) {
          const p = await createPubSubPublisher(config.project, o.env.PUBSUB_BRIDGE_URL);
          lifecycle.onShutdown('pubsub', () => p.close());
          publisher = p;
        }
        return {
          config,
          db,
          redis: redisReady ? redis : undefined,
          lock: redisReady && redis ? new RedisLock(redis, { owner: 'afterlife-cli' }) : undefined,
          publisher,
          logger,
          faults: noFaults,
          lifecycle,
          clock: Date.now,
        };
      })();
      return runtime;
    },
    progress: (line) => {
      process.stderr.write(`${inline(line)}\n`);
    },
    close: async () => {
      await lifecycle.shutdown();
      redis?.disconnect();
      await closePool();
    },
  };
}
