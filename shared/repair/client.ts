import { DBOSClient } from '@dbos-inc/dbos-sdk';
import type { Config } from '../config/index.js';
import { createPool, type Lifecycle, type Logger } from '../../packages/executor/src/plane/index.js';

/**
 * DBOS's client for fork and cancel, created on first use (most invocations never fork) and destroyed at
 * shutdown. Its own small pool: each client call checks a connection out for one statement or one
 * transaction and returns it, so nothing is held across our waits. Its pool is built the same way as ours.
 */
export const DBOS_CLIENT_POOL_SIZE = 2;
/** DBOS's own default for its pools' sessions (DEFAULT_IDLE_TRANSACTION_TIMEOUT_MS), kept on ours. */
const DBOS_CLIENT_IDLE_TRANSACTION_MS = 60_000;

export function lazyDbosClient(config: Config, logger: Logger, lifecycle: Lifecycle): () => Promise<DBOSClient> {
  let pending: Promise<DBOSClient> | undefined;
  return () => {
    pending ??= (async () => {
      const common = {
        systemDatabaseSchemaName: config.dbosSchema,
        applicationName: config.applicationName,
        systemDatabasePoolSize: DBOS_CLIENT_POOL_SIZE,
      };
      // Always our pool, never one DBOS creates: DBOS sets idle_in_transaction_session_timeout on its own
      // pool's connections with a query queued from the pool's 'connect' event, ahead of the borrower's
      // first query, which pg reports as a DeprecationWarning on the operator's terminal (`afterlife-plane fork`).
      // The same timeout as a startup option costs no query. Over the connector the URL is a placeholder.
      const { pool, close } = await createPool(
        { ...config, database: { ...config.database, poolMax: DBOS_CLIENT_POOL_SIZE } },
        logger,
        'afterlife-dbos-client',
        { idle_in_transaction_session_timeout: DBOS_CLIENT_IDLE_TRANSACTION_MS },
      );
      pool.on('error', (err) => logger.warn('idle DBOS client connection errored', { err }));
      lifecycle.onShutdown('dbos-client-pool', close);
      const systemDatabaseUrl = config.database.kind === 'url' ? config.database.url : 'postgresql://cloud-sql-connector/';
      const client = await DBOSClient.create({ systemDatabaseUrl, systemDatabasePool: pool, ...common });
      lifecycle.onShutdown('dbos-client', () => client.destroy());
      return client;
    })();
    pending.catch(() => {
      pending = undefined;
    });
    return pending;
  };
}
