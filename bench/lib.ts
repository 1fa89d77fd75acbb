import { DBOS } from '@dbos-inc/dbos-sdk';
import pg from 'pg';
import { migrate } from '../shared/db/migrate.js';
import { createDb, type Db } from '../packages/executor/src/db/pool.js';
import { silentLogger } from '../packages/executor/src/log.js';

/** Shared plumbing for benchmarks: throwaway databases with DBOS's real schema, cloned for identical data. */
export const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export function urlFor(name: string): string {
  const u = new URL(ADMIN_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: ADMIN_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export async function createDbosDatabase(name: string): Promise<string> {
  await admin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.query(`CREATE DATABASE ${name}`);
  });
  const url = urlFor(name);
  await DBOS.migrate(url);
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  await migrate(afterlifeDb(pool, 1));
  await pool.end();
  return url;
}

export async function cloneDatabase(template: string, name: string): Promise<string> {
  await admin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  });
  return urlFor(name);
}

export async function dropDatabase(name: string): Promise<void> {
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

export function afterlifeDb(pool: pg.Pool, max: number): Db {
  return createDb(pool, max, { dbosSchema: 'dbos', afterlifeSchema: 'afterlife', logger: silentLogger(), budgetWaitMs: 10_000 });
}

export function ms(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e6;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
}
