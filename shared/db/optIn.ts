import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { render } from './migrate.js';
import { type Db, ident } from '../../packages/executor/src/plane/index.js';

/**
 * Opt-in index migrations on DBOS's tables (docs/design.md#opt-in-indexes: "an index afterlife
 * needs on dbos.workflow_status is its own opt-in migration, named afterlife_…"). They are not part of `migrate`
 * because an operator decides when to build an index on a busy table. Each file creates one index
 * CONCURRENTLY (outside a transaction, never blocking DBOS's writes) and is idempotent; an index left
 * INVALID by an interrupted build is dropped and rebuilt. A file that replaces an earlier index names it in a
 * `-- supersedes: <name>` line; the earlier one is dropped (CONCURRENTLY) only once its successor is built,
 * so a fleet is never left with neither.
 */
export const OPT_IN_DIR = fileURLToPath(new URL('./migrations/optin/', import.meta.url));

/** An opt-in index's name, which is also its file's name (docs/design.md#opt-in-indexes: named afterlife_…). */
const NAME = 'afterlife_[a-z0-9_]+';

export async function listOptInIndexes(dir = OPT_IN_DIR): Promise<string[]> {
  return (await readdir(dir))
    .filter((f) => new RegExp(`^${NAME}\\.sql$`).test(f))
    .map((f) => f.replace(/\.sql$/, ''))
    .sort();
}

export async function applyOptInIndexes(db: Db, names?: string[], dir = OPT_IN_DIR): Promise<string[]> {
  const all = await listOptInIndexes(dir);
  const chosen = names ?? all;
  for (const n of chosen) if (!all.includes(n)) throw new Error(`unknown opt-in index ${n}; known: ${all.join(', ')}`);
  for (const name of chosen) {
    const invalid = await db.query(
      `SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relname = $2 AND NOT i.indisvalid`,
      [db.dbosSchema, name],
      'optin.check',
    );
    if (invalid.rowCount) await dropIndex(db, name, 'optin.dropInvalid');
    const sql = await readFile(`${dir}${name}.sql`, 'utf8');
    await db.query(render(sql, db), [], 'optin.create');
    for (const old of supersedes(sql)) await dropIndex(db, old, 'optin.dropSuperseded');
  }
  return chosen;
}

function dropIndex(db: Db, name: string, tag: string): Promise<unknown> {
  return db.query(`DROP INDEX CONCURRENTLY IF EXISTS ${ident(db.dbosSchema)}.${ident(name)}`, [], tag);
}

function supersedes(sql: string): string[] {
  return [...sql.matchAll(new RegExp(`^-- supersedes: (${NAME})\\s*$`, 'gm'))].map((m) => m[1] ?? '').filter(Boolean);
}

/** Of the named opt-in indexes, those built and valid on DBOS's tables (doctor). */
export async function validOptInIndexes(db: Db, names: string[]): Promise<string[]> {
  const res = await db.query<{ name: string }>(
    `SELECT c.relname::text AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = ANY($2::text[]) AND i.indisvalid ORDER BY 1`,
    [db.dbosSchema, names],
    'optin.valid',
  );
  return res.rows.map((r) => r.name);
}
