import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { type Db, ident } from '../../packages/executor/src/plane/index.js';

/**
 * Applies `migrations/NNNN_name.sql` in order, each in its own transaction, under a transaction-level
 * advisory lock so that concurrent cold starts migrate once. Applied IDs are recorded in
 * `<schema>.migrations`; a file is never applied twice and never edited after it ships.
 */
export const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export async function loadMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  const out: Migration[] = [];
  for (const file of files) {
    out.push({ id: Number(file.slice(0, 4)), name: file.replace(/\.sql$/, ''), sql: await readFile(`${dir}${file}`, 'utf8') });
  }
  out.forEach((m, i) => {
    if (i > 0 && m.id <= (out[i - 1]?.id ?? 0)) throw new Error(`duplicate migration number at ${m.name}`);
  });
  return out;
}

/** Stable key derived from the schema name, so two afterlife schemas in one database don't block each other. */
function lockKey(schema: string): number {
  let h = 0x61667465; // "afte"
  for (const ch of schema) h = (Math.imul(h, 31) + ch.charCodeAt(0)) | 0;
  return h;
}

export function render(sql: string, db: Pick<Db, 'afterlifeSchema' | 'dbosSchema'>): string {
  return sql.replaceAll(':SCHEMA:', ident(db.afterlifeSchema)).replaceAll(':DBOS_SCHEMA:', ident(db.dbosSchema));
}

export async function migrate(db: Db, dir = MIGRATIONS_DIR): Promise<{ applied: string[] }> {
  const migrations = await loadMigrations(dir);
  const schema = ident(db.afterlifeSchema);
  const applied: string[] = [];
  // Every cold start calls this. When the schema is current it must not need CREATE privileges: Postgres
  // checks them before "IF NOT EXISTS", and a runtime role (Cloud SQL IAM user) has only USAGE and DML.
  // Every file is checked by ID, not by the highest one applied: migrations developed side by side can land
  // out of number order (0013 after 0015), and a ledger at 0015 must still get 0013.
  if ((await appliedCount(db, schema, migrations)) === migrations.length) return { applied };
  for (const m of migrations) {
    const did = await db.transaction(async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [lockKey(db.afterlifeSchema)]);
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await c.query(
        `CREATE TABLE IF NOT EXISTS ${schema}.migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      const done = await c.query('SELECT 1 FROM ' + schema + '.migrations WHERE id = $1', [m.id]);
      if (done.rowCount) return false;
      await c.query(render(m.sql, db));
      await c.query(`INSERT INTO ${schema}.migrations (id, name) VALUES ($1, $2)`, [m.id, m.name]);
      return true;
    }, 'migrate');
    if (did) applied.push(m.name);
  }
  return { applied };
}

async function appliedCount(db: Db, schema: string, migrations: Migration[]): Promise<number> {
  try {
    const ids = migrations.map((m) => m.id);
    const res = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${schema}.migrations WHERE id = ANY($1::int[])`,
      [ids],
      'migrate.version',
    );
    return res.rows[0]?.n ?? 0;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === '42P01' || code === '3F000') return 0; // no ledger table or no schema yet
    throw err;
  }
}

/** The names of the migrations applied to `afterlifeSchema`, oldest first (`afterlife-plane migrate` reports them). */
export async function appliedMigrationNames(db: Db, afterlifeSchema: string): Promise<string[]> {
  const current = await db.query<{ name: string }>(`SELECT name FROM ${ident(afterlifeSchema)}.migrations ORDER BY id`);
  return current.rows.map((r) => r.name);
}
