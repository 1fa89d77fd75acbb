import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executorsWithSessions, sessionPrefix } from '../../../shared/dbos/reaper.js';
import { afterlifeDb, createTestDatabase, type TestDatabase } from '../../helpers/db.js';

/**
 * Issue 10: Postgres rewrites non-printable-ASCII bytes of application_name (`?` up to 15,
 * `\xNN` from 16), so a live executor named `sec-ü1` has sessions named `dbos_transact_sec-??1_v1`. Its
 * sessions must still count as its sessions: never "absent" because of the spelling.
 */
describe('session evidence for executor IDs Postgres rewrites', () => {
  let tdb: TestDatabase;
  const clients: pg.Client[] = [];
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    for (const c of clients) await c.end().catch(() => undefined);
    await tdb?.drop();
  });

  async function session(applicationName: string): Promise<string> {
    const c = new pg.Client({ connectionString: tdb.url, application_name: applicationName });
    await c.connect();
    clients.push(c);
    const r = await c.query<{ name: string }>('SELECT application_name AS name FROM pg_stat_activity WHERE pid = pg_backend_pid()');
    return r.rows[0]?.name ?? '';
  }

  it.each(['sec-ü1', 'exec-日本', 'tab\there', `long-${'x'.repeat(60)}ü`])('a live session of %j is found', async (id) => {
    const stored = await session(`dbos_transact_${id}_v1`);
    const db = afterlifeDb(tdb.url);
    try {
      expect(await executorsWithSessions(db, [id])).toEqual(new Set([id]));
      expect(stored.startsWith(sessionPrefix(id))).toBe(true);
    } finally {
      await db.end();
    }
  });

  it('an ASCII ID still needs its own sessions (the prefix is exact)', async () => {
    await session('dbos_transact_exec-1_v1');
    const db = afterlifeDb(tdb.url);
    try {
      expect(await executorsWithSessions(db, ['exec-1', 'exec-2', 'exec-1x'])).toEqual(new Set(['exec-1']));
    } finally {
      await db.end();
    }
  });
});
