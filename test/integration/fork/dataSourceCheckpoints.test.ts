import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dataSourceCheckpointsFrom } from '../../../shared/dbos/dataSourceCheckpoints.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';

/**
 * The reader behind the data-source check, on a real Postgres: rows at or past each cut only, schemas
 * without the table skipped, and a table afterlife's role may not read reported as unknown (-1), never as
 * "no checkpoints" (which would let a rewind through).
 */
describe('dataSourceCheckpointsFrom', () => {
  let tdb: TestDatabase;
  const role = uniqueName('ds_reader').replace(/[^a-z0-9_]/g, '_');
  beforeAll(async () => {
    tdb = await createTestDatabase();
    await tdb.sql.query(
      `CREATE SCHEMA app_ds; CREATE TABLE app_ds.transaction_completion (workflow_id text, function_num int, output text, error text, PRIMARY KEY (workflow_id, function_num))`,
    );
    await tdb.sql.query(`INSERT INTO app_ds.transaction_completion (workflow_id, function_num) VALUES ('w1', 1), ('w1', 4), ('w2', 2)`);
    await tdb.sql.query(`CREATE ROLE ${role} LOGIN PASSWORD 'x'; GRANT USAGE ON SCHEMA app_ds TO ${role}`);
  });
  afterAll(async () => {
    // Roles are cluster-wide: revoked and dropped before the database goes.
    await tdb?.sql.query(`REVOKE ALL ON SCHEMA app_ds FROM ${role}; DROP ROLE IF EXISTS ${role}`);
    await tdb?.drop();
  });

  it('finds checkpoints at or past each cut, skipping schemas without the table', async () => {
    const db = afterlifeDb(tdb.url);
    try {
      const found = await dataSourceCheckpointsFrom(
        db,
        ['no_such_schema', 'app_ds'],
        [
          { workflowId: 'w1', fromStep: 2 },
          { workflowId: 'w2', fromStep: 3 },
          { workflowId: 'w3', fromStep: 0 },
        ],
      );
      expect(found).toEqual([{ schema: 'app_ds', workflowId: 'w1', functionId: 4, recorded: false }]);
      expect(await dataSourceCheckpointsFrom(db, ['app_ds'], [{ workflowId: 'w2', fromStep: 2 }])).toEqual([
        { schema: 'app_ds', workflowId: 'w2', functionId: 2, recorded: false },
      ]);
    } finally {
      await db.end();
    }
  });

  it('a table its role may not read is unknown (-1), so the rewind falls back to a fork', async () => {
    const url = new URL(tdb.url);
    url.username = role;
    url.password = 'x';
    const db = afterlifeDb(url.toString());
    try {
      expect(await dataSourceCheckpointsFrom(db, ['app_ds'], [{ workflowId: 'w3', fromStep: 0 }])).toEqual([
        { schema: 'app_ds', workflowId: 'w3', functionId: -1, recorded: false },
      ]);
    } finally {
      await db.end();
    }
  });
});
