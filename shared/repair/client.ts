import { DBOSClient } from '@dbos-inc/dbos-sdk';
import type { Config } from '../config/index.js';
import { createPool } from '../../packages/executor/src/db/pool.js';
import type { Lifecycle } from '../../packages/executor/src/lifecycle/shutdown.js';
import type { Logger } from '../../packages/executor/src/log.js';

/**
 * DBOS's client for fork and cancel, created on first use (most invocations never fork) and destroyed at
 * shutdown. Its own small pool: each client call checks a connection out for one statement or one
 * transaction and returns it, so nothing is held across our waits. Over the Cloud SQL connector it gets a
 * pool built the same way as ours (the URL is then only a placeholder DBOS requires).
 */
export const DBOS_CLIENT_POOL_SIZE = 2;

export function lazyDbosClient(config: Config, logger: Logger, lifecycle: Lifecycle): () => Promise<DBOSClient> {
  let pending: Promise<DBOSClient> | undefined;
  return () => {
    pending ??= (async () => {
      const common = {
        systemDatabaseSchemaName: config.dbosSchema,
        applicationName: config.applicationName,
        systemDatabasePoolSize: DBOS_CLIENT_POOL_SIZE,
      };
      let client: DBOSClient;
      if (config.database.kind === 'url') {
        client = await DBOSClient.create({ systemDatabaseUrl: config.database.url, ...common });
      } else {
        const { pool, close } = await createPool(
          { ...config, database: { ...config.database, poolMax: DBOS_CLIENT_POOL_SIZE } },
          logger,
          'afterlife-dbos-client',
        );
        pool.on('error', (err) => logger.warn('idle DBOS client connection errored', { err }));
        lifecycle.onShutdown('dbos-client-pool', close);
        client = await DBOSClient.create({ systemDatabaseUrl: 'postgresql://cloud-sql-connector/', systemDatabasePool: pool, ...common });
      }
      lifecycle.onShutdown('dbos-client', () => client.destroy());
      return client;
    })();
    pending.catch(() => {
      pending = undefined;
    });
    return pending;
  };
}
