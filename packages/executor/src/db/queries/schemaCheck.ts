import type pg from 'pg';

// Whether afterlife's schema is where a process is told it is: the kit asks at attach, before anything starts.

/** The table `name` (schema-qualified) as Postgres resolves it, or null when there is none. */
export async function findTable(pool: pg.Pool, name: string): Promise<string | null | undefined> {
  const r = await pool.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [name]);
  return r.rows[0]?.t;
}
