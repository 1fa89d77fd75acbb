import { DBOS } from '@dbos-inc/dbos-sdk';
import {
  assertStillOwnsWorkflow,
  type DataSourceTransactionHandler,
  migrateDataSourcePG,
  registerDataSource,
  replayRecordedStep,
  runTransaction,
} from '@dbos-inc/dbos-sdk/datasource';
import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';

/**
 * A DBOS data source on node-postgres, written to DBOS 5.3's data-source API (`registerDataSource`,
 * `runTransaction`, `migrateDataSourcePG`, `replayRecordedStep`, `assertStillOwnsWorkflow`): the published
 * ones (`@dbos-inc/postgres-datasource` 4.24.16, `knex-datasource` 4.5.13) call helpers 5.3 no longer
 * exports, and `@dbos-inc/node-pg-datasource` is not on npm. It keeps its checkpoint in
 * `dbos.transaction_completion`, in the same transaction as the user's writes, exactly as DBOS's own
 * data sources do, and consults it before running a transaction: the thing an outside rewind cannot undo.
 *
 *   chargingWorkflow  plan (0), tool-<choice> (1, the choice read in workflow code, as in divergent.ts),
 *                     charge-<choice> (2, a transaction inserting into public.charges), answer (3, slow)
 */
const SCHEMA = 'dbos';
const txClient = new AsyncLocalStorage<pg.PoolClient>();

class NodePgDataSource implements DataSourceTransactionHandler {
  readonly name = 'app-db';
  #pool: pg.Pool | undefined;

  get pool(): pg.Pool {
    if (!this.#pool) {
      this.#pool = new pg.Pool({
        connectionString: process.env.DBOS_SYSTEM_DATABASE_URL,
        max: 2,
        application_name: 'agent-app-datasource',
      });
      // An idle client whose session the server ended (a Postgres restart) must not crash the app.
      this.#pool.on('error', () => undefined);
    }
    return this.#pool;
  }

  async initialize(): Promise<void> {
    const c = await this.pool.connect();
    try {
      // DBOS's migrator takes its advisory lock per transaction: one transaction for all of it.
      await c.query('BEGIN');
      await migrateDataSourcePG(async (sql) => (await c.query(sql)).rows, SCHEMA);
      // Executors launched together would race CREATE TABLE IF NOT EXISTS (pg_type's unique index).
      await c.query(`SELECT 1 FROM pg_advisory_xact_lock(hashtext('agent-app.charges'))`);
      await c.query(
        'CREATE TABLE IF NOT EXISTS public.charges (workflow_id text NOT NULL, step int NOT NULL, item text NOT NULL, executor_id text NOT NULL)',
      );
      await c.query('COMMIT');
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      c.release();
    }
  }

  async destroy(): Promise<void> {
    await this.#pool?.end();
    this.#pool = undefined;
  }

  async deleteCheckpoints(workflowID: string, startStep: number): Promise<void> {
    await this.pool.query(`DELETE FROM ${SCHEMA}.transaction_completion WHERE workflow_id = $1 AND function_num >= $2`, [
      workflowID,
      startStep,
    ]);
  }

  async invokeTransactionFunction<This, Args extends unknown[], Return>(
    _config: unknown,
    target: This,
    func: (this: This, ...args: Args) => Promise<Return>,
    ...args: Args
  ): Promise<Return> {
    const workflowID = DBOS.workflowID;
    const stepID = DBOS.stepID;
    if (workflowID === undefined || stepID === undefined) return func.call(target, ...args);
    const recorded = await this.pool.query<{ output: string | null; error: string | null }>(
      `SELECT output, error FROM ${SCHEMA}.transaction_completion WHERE workflow_id = $1 AND function_num = $2`,
      [workflowID, stepID],
    );
    const row = recorded.rows[0];
    if (row) return replayRecordedStep<Return>(row);
    const c = await this.pool.connect();
    try {
      await c.query('BEGIN');
      const result = await txClient.run(c, () => func.call(target, ...args));
      await c.query(`INSERT INTO ${SCHEMA}.transaction_completion (workflow_id, function_num, output) VALUES ($1, $2, $3)`, [
        workflowID,
        stepID,
        JSON.stringify({ json: result }),
      ]);
      await assertStillOwnsWorkflow(workflowID);
      await c.query('COMMIT');
      return result;
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      c.release();
    }
  }
}

const ds = new NodePgDataSource();
registerDataSource(ds);

function client(): pg.PoolClient {
  const c = txClient.getStore();
  if (!c) throw new Error('not inside a transaction of app-db');
  return c;
}

async function charge(item: string): Promise<string> {
  await client().query('INSERT INTO public.charges (workflow_id, step, item, executor_id) VALUES ($1, $2, $3, $4)', [
    DBOS.workflowID,
    DBOS.stepID,
    item,
    DBOS.executorID,
  ]);
  return `${item}@${DBOS.executorID}`;
}

async function step(name: string, ms = 0): Promise<string> {
  return DBOS.runStep(
    async () => {
      if (ms > 0) await new Promise((r) => setTimeout(r, ms));
      return `${name}@${DBOS.executorID}`;
    },
    { name },
  );
}

async function readChoice(key: string): Promise<string> {
  try {
    const res = await ds.pool.query<{ value: string }>('SELECT value FROM public.divergent_choice WHERE key = $1', [key]);
    return res.rows[0]?.value ?? 'a';
  } catch (err) {
    if ((err as { code?: unknown }).code === '42P01') return 'a';
    throw err;
  }
}

async function chargingFn(spec: { key: string; lastStepMs: number }): Promise<string[]> {
  const out = [await step('plan')];
  const tool = await readChoice(spec.key);
  out.push(await step(`tool-${tool}`));
  out.push(await runTransaction(() => charge(`charge-${tool}`), `charge-${tool}`, { dsName: ds.name }));
  out.push(await step('answer', spec.lastStepMs));
  return out;
}
export const chargingWorkflow = DBOS.registerWorkflow(chargingFn, { name: 'chargingWorkflow' });
