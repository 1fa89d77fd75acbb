import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

/**
 * afterlife's own schema as its migrations build it, committed (shared/db/schema.txt) and diffed here: a
 * migration renumbered, edited after it landed, or a change made outside a migration shows as a diff in review
 * and fails this test. `AFTERLIFE_WRITE_SCHEMA=1` rewrites the file after a new migration.
 */
const FILE = join(import.meta.dirname, '../../../shared/db/schema.txt');

describe("afterlife's schema", () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  async function dump(): Promise<string> {
    const q = async (sql: string) => (await tdb.sql.query<{ line: string }>(sql)).rows.map((r) => r.line);
    const sections: Array<[string, string[]]> = [
      [
        'columns',
        await q(`SELECT format('%s.%s %s%s%s', table_name, column_name, data_type,
                        CASE WHEN is_nullable = 'NO' THEN ' NOT NULL' ELSE '' END,
                        COALESCE(' DEFAULT ' || column_default, '')) AS line
                   FROM information_schema.columns WHERE table_schema = 'afterlife' ORDER BY table_name, ordinal_position`),
      ],
      [
        'constraints',
        await q(`SELECT format('%s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) AS line
                   FROM pg_constraint WHERE connamespace = 'afterlife'::regnamespace ORDER BY conrelid::regclass::text, conname`),
      ],
      ['indexes', await q(`SELECT indexdef AS line FROM pg_indexes WHERE schemaname = 'afterlife' ORDER BY indexname`)],
      [
        'triggers',
        await q(`SELECT format('%s %s', tgrelid::regclass, pg_get_triggerdef(oid)) AS line FROM pg_trigger
                  WHERE NOT tgisinternal AND tgrelid::regclass::text LIKE 'afterlife.%' ORDER BY 1`),
      ],
      [
        'functions',
        await q(`SELECT format('%s(%s) %s', p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid)) AS line
                   FROM pg_proc p WHERE p.pronamespace = 'afterlife'::regnamespace ORDER BY 1`),
      ],
    ];
    return sections.map(([name, lines]) => `-- ${name}\n${lines.join('\n')}\n`).join('\n');
  }

  it('is what shared/db/schema.txt says', async () => {
    const now = await dump();
    if (process.env.AFTERLIFE_WRITE_SCHEMA === '1') writeFileSync(FILE, now);
    expect(now.split('\n').length).toBeGreaterThan(100);
    expect(now).toBe(readFileSync(FILE, 'utf8'));
  });
});
