import { DBOSClient } from '@dbos-inc/dbos-sdk';
import type pg from 'pg';
import { waitFor } from '../../helpers/db.js';

/** Shared by the fork suites: start workflows by name through DBOS's client, and wait on their status. */
export const FORK_QUEUE = 'forktest';
export const QUEUES = { [FORK_QUEUE]: {} };

export async function dbosClient(url: string, applicationName: string): Promise<DBOSClient> {
  return DBOSClient.create({ systemDatabaseUrl: url, applicationName, systemDatabasePoolSize: 2 });
}

export async function enqueue(client: DBOSClient, workflowName: string, workflowID: string, appVersion: string, ...args: unknown[]): Promise<void> {
  await client.enqueue({ queueName: FORK_QUEUE, workflowName, workflowID, appVersion }, ...args);
}

export async function statusOf(sql: pg.Pool, id: string): Promise<string | undefined> {
  const r = await sql.query<{ status: string }>(`SELECT status FROM dbos.workflow_status WHERE workflow_uuid = $1`, [id]);
  return r.rows[0]?.status;
}

export function waitStatus(sql: pg.Pool, id: string, want: string, timeoutMs = 45_000): Promise<string> {
  return waitFor(`${id} ${want}`, async () => ((await statusOf(sql, id)) === want ? want : undefined), { timeoutMs });
}

/** How many times a step body started, per workflow (public.step_runs, written by the example app). */
export async function stepStarts(sql: pg.Pool, workflowId: string, step: number): Promise<number> {
  const r = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM public.step_runs WHERE workflow_id = $1 AND step = $2 AND phase = 'start'`,
    [workflowId, step],
  );
  return r.rows[0]?.n ?? 0;
}

export async function hasCheckpoint(sql: pg.Pool, workflowId: string, functionId: number): Promise<boolean> {
  const r = await sql.query(`SELECT 1 FROM dbos.operation_outputs WHERE workflow_uuid = $1 AND function_id = $2`, [workflowId, functionId]);
  return (r.rowCount ?? 0) > 0;
}

export async function forksOf(sql: pg.Pool, source: string): Promise<string[]> {
  const r = await sql.query<{ workflow_uuid: string }>(`SELECT workflow_uuid FROM dbos.workflow_status WHERE forked_from = $1 ORDER BY 1`, [source]);
  return r.rows.map((x) => x.workflow_uuid);
}
