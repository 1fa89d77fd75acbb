import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createDb, type Db } from '../../packages/executor/src/db/pool.js';
import { silentLogger } from '../../packages/executor/src/log.js';
import type { Faults } from '../../packages/executor/src/testing/faults.js';
import { ADMIN_DATABASE_URL, databaseUrl } from './services.js';

/**
 * A fresh database per test file, cloned from the run's template (DBOS schema + afterlife schema), so
 * files run in parallel without seeing each other's rows.
 */
export interface TestDatabase {
  name: string;
  url: string;
  /** An admin pool for assertions and backdating; not afterlife's. */
  sql: pg.Pool;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const template = inject('templateDb');
  const name = `afterlife_t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await admin.connect();
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
        break;
      } catch (err) {
        // Another file cloning the template at the same moment: try again shortly.
        if (attempt >= 20 || !/being accessed by other users/.test(String(err))) throw err;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
  } finally {
    await admin.end();
  }
  const url = databaseUrl(name);
  const sql = new pg.Pool({ connectionString: url, max: 4, application_name: 'afterlife-test' });
  sql.on('error', () => undefined);
  return {
    name,
    url,
    sql,
    drop: async () => {
      await sql.end();
      const a = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}

/** afterlife's Db over a test database, with its own small pool. */
export function afterlifeDb(url: string, opts: { max?: number; faults?: Faults; sessionName?: string } = {}): Db & { pool: pg.Pool } {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 3, application_name: opts.sessionName ?? 'afterlife' });
  const db = createDb(pool, opts.max ?? 3, {
    dbosSchema: 'dbos',
    afterlifeSchema: 'afterlife',
    logger: silentLogger(),
    ...(opts.faults ? { faults: opts.faults } : {}),
  });
  return Object.assign(db, { pool });
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** Polls a condition until it holds or the bound passes; the bound is the failure, not a sleep. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== null && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 100));
  }
}

export interface WorkflowRow {
  workflow_uuid: string;
  status: string;
  executor_id: string | null;
  application_version: string | null;
  application_name: string | null;
  queue_name: string | null;
  recovery_attempts: string;
}

export async function workflowRows(sql: pg.Pool, ids: string[]): Promise<WorkflowRow[]> {
  const res = await sql.query<WorkflowRow>(
    `SELECT workflow_uuid, status, executor_id, application_version, application_name, queue_name, recovery_attempts::text
       FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) ORDER BY workflow_uuid`,
    [ids],
  );
  return res.rows;
}
