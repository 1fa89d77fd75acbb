import { type Db, ident } from '../../packages/executor/src/plane/index.js';

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
  /**
   * Whether DBOS also recorded the step in `operation_outputs`. A data source commits its checkpoint with
   * the user's writes, then DBOS records the step; an executor that died (or hung) between the two leaves
   * a transaction that was applied but that the system database never saw. Such a checkpoint is not a
   * discarded run's: a same-path repair (stuck, orphaned version) cut right after the last recorded step
   * must rewind over it (the replay is served it: applied once), because a fork, under a new ID the
   * checkpoint does not know, would apply the transaction a second time. False when unknown (-1).
   */
  recorded: boolean;
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
    const res = await db
      .query<{ workflow_id: string; function_num: number; recorded: boolean }>(
        `SELECT tc.workflow_id, tc.function_num,
              EXISTS (SELECT 1 FROM ${ident(db.dbosSchema)}.operation_outputs o
                       WHERE o.workflow_uuid = tc.workflow_id AND o.function_id = tc.function_num) AS recorded
         FROM ${ident(schema)}.transaction_completion tc
         JOIN unnest($1::text[], $2::int[]) AS c(workflow_id, from_step) ON c.workflow_id = tc.workflow_id
        WHERE tc.function_num >= c.from_step
        ORDER BY tc.workflow_id, tc.function_num`,
        [cuts.map((c) => c.workflowId), cuts.map((c) => c.fromStep)],
        'dbos.dataSourceCheckpoints',
      )
      .catch((err: unknown) => {
        // A table the app created after afterlife's grants: not knowing must not read as "none" (fail closed).
        if ((err as { code?: unknown }).code !== INSUFFICIENT_PRIVILEGE) throw err;
        return { rows: cuts.map((c) => ({ workflow_id: c.workflowId, function_num: -1, recorded: false })) };
      });
    out.push(...res.rows.map((r) => ({ schema, workflowId: r.workflow_id, functionId: r.function_num, recorded: r.recorded })));
  }
  return out;
}

/**
 * Whether `DBOSClient.rewindWorkflow` may rewind these cuts from outside the app: `unsafe` says why not,
 * else `served` lists the unrecorded checkpoints the replay will be handed. For a diverged workflow every
 * checkpoint at or past the cut is unsafe (the replay takes another path, and would be served outputs of
 * the discarded one). For a same-path repair (cut right after the last recorded step) only recorded and
 * unknown ones are: an unrecorded checkpoint there is the transaction the replay reaches first, and must
 * be served, not re-applied.
 */
export async function outsideRewindCheck(
  db: Db,
  schemas: readonly string[],
  cuts: ReadonlyArray<{ workflowId: string; fromStep: number }>,
  samePath: boolean,
): Promise<{ unsafe: string } | { unsafe?: undefined; served: DataSourceCheckpoint[] }> {
  const found = await dataSourceCheckpointsFrom(db, schemas, cuts);
  const unknown = (c: DataSourceCheckpoint) => c.functionId < 0;
  const blockers = samePath ? found.filter((c) => c.recorded || unknown(c)) : found;
  const [first] = blockers;
  if (!first) return { served: found.filter((c) => !unknown(c)) };
  return {
    unsafe: unknown(first)
      ? `${first.schema}.transaction_completion (data-source checkpoints) is not readable by afterlife's role: grant it SELECT, or rewinds are not known to be safe`
      : `data-source checkpoints at or past the cut (${first.schema}.transaction_completion: ${first.workflowId} step ${first.functionId}` +
        `${blockers.length > 1 ? ` and ${blockers.length - 1} more` : ''}); DBOSClient.rewindWorkflow cannot remove them, and the replay would be served their outputs`,
  };
}

/**
 * Why a fork from `startStep` must not be made, or undefined: an unrecorded checkpoint at or past it is a
 * transaction already applied that the fork (a new ID) would apply again. The workflow is left as it is
 * for a repair under its own ID: a rewind, DBOS's resume, or an executor of its version.
 */
export async function forkWouldReapply(
  db: Db,
  schemas: readonly string[],
  workflowId: string,
  startStep: number,
): Promise<string | undefined> {
  // Unknown (a table afterlife may not read) counts too: not knowing must not read as "safe to fork".
  const found = (await dataSourceCheckpointsFrom(db, schemas, [{ workflowId, fromStep: startStep }])).filter((c) => !c.recorded);
  const [first] = found;
  if (!first) return undefined;
  if (first.functionId < 0) {
    return `${first.schema}.transaction_completion is not readable by afterlife's role, so a fork of ${workflowId} could apply a transaction again; grant it SELECT`;
  }
  return (
    `${first.schema}.transaction_completion holds step ${first.functionId} of ${workflowId}, a transaction the system database never recorded; ` +
    'a fork would apply it again, so it is left for a repair under its own ID (a rewind, DBOS resumeWorkflow, or an executor of its version)'
  );
}
