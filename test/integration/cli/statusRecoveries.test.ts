import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StatusOutput } from '../../../cli/schemas.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';

/**
 * Issue 20: `afterlife-plane status` listed "recent recoveries" sorted as text (the query selected `id::text AS
 * id` and `ORDER BY id` then named that text): #9 … #2, then #16 and #15, leaving out #10–#14. With 20
 * recoveries the ten newest are #20 down to #11, in that order.
 */
describe('afterlife-plane status: recent recoveries', () => {
  let tdb: TestDatabase;
  const app = uniqueName('cli-recoveries');
  let env: Record<string, string>;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    env = { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app };
    for (let i = 1; i <= 20; i++) {
      await tdb.sql.query(
        `INSERT INTO afterlife.recoveries (application_name, executor_id, reason, detected_by, recovered_by, lock_mode, outcome, reenqueued)
         VALUES ($1, $2, 'heartbeat-lapsed', 'reaper', 'executorDeath', 'locked', 'completed', $3)`,
        [app, `exec-${i}`, i],
      );
    }
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  it('orders them by number, newest first, in --json and on the terminal', async () => {
    const ids = (
      await tdb.sql.query<{ n: string }>(
        `SELECT id::text AS n FROM afterlife.recoveries WHERE application_name = $1 ORDER BY recoveries.id`,
        [app],
      )
    ).rows.map((r) => Number(r.n));
    const newest = ids.slice(-10).reverse();
    const json = parseJson(await runCli(['status', '--json'], env), StatusOutput);
    expect(json.recentRecoveries.map((r) => r.id)).toEqual(newest);
    expect(json.recentRecoveries.map((r) => r.executorId)).toEqual(Array.from({ length: 10 }, (_, i) => `exec-${20 - i}`));
    const text = (await runCli(['status'], env)).stdout;
    const shown = [...text.matchAll(/^#(\d+)\s/gm)].map((m) => Number(m[1]));
    expect(shown).toEqual(newest);
  });
});
