import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../log.js';
import { noFaults, type Faults } from '../testing/faults.js';
import { DbBudget } from './budget.js';
import type { PoolTarget } from './target.js';

/**
 * The only way afterlife talks to Postgres. Each call takes a connection and gives it back before it
 * returns: nothing that is not a database statement (a lock wait, a publish, a sleep) ever runs while a
 * client is checked out. `transaction` runs DB statements only; its callback must not await anything else.
 */
export interface Db {
  readonly dbosSchema: string;
  readonly afterlifeSchema: string;
  readonly budget: DbBudget;
  /**
   * `tag` names the statement in logs and fault points. With `prepared`, the tag and a digest of the text
   * name a server-side prepared statement, so a statement run many times in a row (recovery batches) is
   * parsed once per connection, and variants of one tag's text (which evidence a batch re-checks) each
   * get their own.
   */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values?: unknown[],
    tag?: string,
    opts?: { prepared?: boolean },
  ): Promise<pg.QueryResult<R>>;
  transaction<T>(fn: (client: pg.ClientBase) => Promise<T>, tag?: string): Promise<T>;
  end(): Promise<void>;
}

export interface DbOptions {
  dbosSchema: string;
  afterlifeSchema: string;
  logger: Logger;
  faults?: Faults;
  /** How long a caller may wait for a budget slot before "retry later". */
  budgetWaitMs?: number;
}

export function createDb(pool: pg.Pool, limit: number, opts: DbOptions): Db {
  const faults = opts.faults ?? noFaults;
  const budget = new DbBudget(limit, opts.budgetWaitMs ?? 50);
  pool.on('error', (err) => {
    // Idle clients are dropped by failovers and proxies; without a listener Node would crash.
    opts.logger.warn('idle database client errored; the pool will replace it', { err });
  });

  async function withClient<T>(tag: string | undefined, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const release = await budget.acquire();
    let client: pg.PoolClient | undefined;
    let broken: Error | undefined;
    // A backend killed while checked out (failover, pg_terminate_backend) emits 'error' on the client as
    // well as failing the query; without a listener that second report would crash the process.
    const onClientError = (err: Error) => opts.logger.warn('database connection lost during a statement', { err, tag });
    try {
      client = await pool.connect();
      client.on('error', onClientError);
      if (faults.enabled) await faults.hit('db.beforeQuery', { tag, pid: (client as unknown as { processID?: number }).processID });
      return await fn(client);
    } catch (err) {
      broken = err instanceof Error ? err : new Error(String(err));
      throw err;
    } finally {
      // A client whose statement failed at the connection level must not go back to the pool.
      client?.off('error', onClientError);
      client?.release(broken !== undefined && isConnectionError(broken) ? broken : undefined);
      release();
    }
  }

  return {
    dbosSchema: opts.dbosSchema,
    afterlifeSchema: opts.afterlifeSchema,
    budget,
    query: (text, values, tag, o) =>
      withClient(tag, (c) =>
        o?.prepared && tag ? c.query({ name: preparedName(tag, text), text, values: values ?? [] }) : c.query(text, values),
      ),
    transaction: (fn, tag) =>
      withClient(tag, async (c) => {
        await c.query('BEGIN');
        try {
          const out = await fn(c);
          await c.query('COMMIT');
          return out;
        } catch (err) {
          await c.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
      }),
    end: () => pool.end(),
  };
}

function isConnectionError(err: Error): boolean {
  const code = (err as { code?: unknown }).code;
  return (
    (typeof code === 'string' && (/^08/.test(code) || /^57P0/.test(code) || code.startsWith('E'))) ||
    /Connection terminated|connection error|Client was closed/i.test(err.message)
  );
}

/**
 * Builds the pool from config: DATABASE_URL over TCP, or the Cloud SQL connector with IAM auth.
 * `application_name` marks our sessions so tests and operators can count them in pg_stat_activity.
 */
export async function createPool(
  config: { database: PoolTarget },
  logger: Logger,
  applicationName = 'afterlife',
  /** More `-c name=value` settings for every session of this pool (startup options: no query on connect). */
  sessionSettings: Record<string, string | number> = {},
): Promise<{ pool: pg.Pool; close: () => Promise<void> }> {
  const common: pg.PoolConfig = {
    max: config.database.poolMax,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: config.database.connectTimeoutMs,
    statement_timeout: config.database.statementTimeoutMs,
    application_name: applicationName,
    // afterlife runs short statements whose estimated cost is inflated by correlated subqueries (the
    // activity clock); above jit_above_cost Postgres then spends 1–2 s compiling a query that runs in
    // milliseconds (measured in bench/reaper). JIT never pays off for these sessions.
    options: ['-c jit=off', ...Object.entries(sessionSettings).map(([k, v]) => `-c ${k}=${v}`)].join(' '),
  };
  if (config.database.kind === 'url') {
    const pool = new pg.Pool({ connectionString: config.database.url, ...common });
    return { pool, close: () => pool.end() };
  }
  // Not exercised offline: the connector needs Google credentials and a real instance.
  const { Connector, AuthTypes, IpAddressTypes } = await import('@google-cloud/cloud-sql-connector');
  const connector = new Connector();
  const db = config.database;
  const options = await connector.getOptions({
    instanceConnectionName: db.instanceConnectionName,
    ipType: IpAddressTypes[db.ipType],
    authType: db.iamAuth ? AuthTypes.IAM : AuthTypes.PASSWORD,
  });
  logger.info('using the Cloud SQL connector', { instance: db.instanceConnectionName, iam: db.iamAuth });
  const pool = new pg.Pool({ ...options, user: db.user, password: db.password, database: db.database, ...common });
  return {
    pool,
    close: async () => {
      await pool.end();
      connector.close();
    },
  };
}

/** A connection refuses a second text under a name it has prepared; the digest keeps each text its own name. */
function preparedName(tag: string, text: string): string {
  return `${tag}:${createHash('sha1').update(text).digest('base64url').slice(0, 16)}`;
}
