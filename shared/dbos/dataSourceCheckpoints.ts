import type { Db } from '../db/pool.js';
import { ident } from '../db/pool.js';

/**
 * DBOS data-source transactions, as DBOS 5.x records them. A transaction step (`runTransaction`,
 * `registerTransaction`, `@ds.transaction()`) runs through the executor's `runInternalStep` under the
 * transaction's own name, so its `operation_outputs` row looks like any step's: the system database has
 * no marker. The data source keeps its own checkpoint, in the same transaction as the user's writes, in
 * `<schema>.transaction_completion (workflow_id, function_num, output, error)` in the app's database
 * (schema `dbos` by default), and a replay consults it before running the transaction.
 *
 * DBOS deletes those checkpoints when a run that used the data source ends (SUCCESS or ERROR), and
 * `DBOS.rewindWorkflow` in the app deletes them from the cut on; `DBOSClient.rewindWorkflow` cannot.
 * So rows left at or past a cut are exactly what an outside rewind would leave behind: the replay would
 * be served, at those function IDs, outputs recorded by the discarded run instead of running its own
 * transactions. This reads them where afterlife can see them (schemas in its own database).
 */
export interface DataSourceCheckpoint {
  schema: string;
  workflowId: string;
  /** -1 when the table exists but afterlife's role may not read it: unknown, so treated as unsafe. */
  functionId: number;
}

const INSUFFICIENT_PRIVILEGE = '42501';

export async function dataSourceCheckpointsFrom(
  db: Db,
  schemas: readonly string[],
  cuts: ReadonlyArray<{ workflowId: string; fromStep: number }>,
): Promise<DataSourceCheckpoint[]> {
  if (!cuts.length || !schemas.length) return [];
  const present = await db.query<{ schema: string }>(
    `SELECT s AS schema FROM unnest($1::text[]) AS s WHERE to_regclass(quote_ident(s) || '.transaction_completion') IS NOT NULL`,
    [schemas],
    'dbos.dataSourceTables',
  );
  const out: DataSourceCheckpoint[] = [];
  for (const { schema } of present.rows) {
    // Params: $1 workflow IDs, $2 their cuts (same order).
    const res = await db.query<{ workflow_id: string; function_num: number }>(
      `SELECT tc.workflow_id, tc.function_num
         FROM ${ident(schema)}.transaction_completion tc
         JOIN unnest($1::text[], $2::int[]) AS c(workflow_id, from_step) ON c.workflow_id = tc.workflow_id
        WHERE tc.function_num >= c.from_step
        ORDER BY tc.workflow_id, tc.function_num`,
      [cuts.map((c) => c.workflowId), cuts.map((c) => c.fromStep)],
      'dbos.dataSourceCheckpoints',
    ).catch((err: unknown) => {
      // A table the app created after afterlife's grants: not knowing must not read as "none" (fail closed).
      if ((err as { code?: unknown }).code !== INSUFFICIENT_PRIVILEGE) throw err;
      return { rows: cuts.map((c) => ({ workflow_id: c.workflowId, function_num: -1 })) };
    });
    out.push(...res.rows.map((r) => ({ schema, workflowId: r.workflow_id, functionId: r.function_num })));
  }
  return out;
}
