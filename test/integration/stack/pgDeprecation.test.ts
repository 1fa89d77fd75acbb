import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dbosSystemUrl } from '../../../scripts/stack/dbosUrl.js';
import { startAgentExecutor } from '../../../scripts/stack/executor.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';

/**
 * Issue 20: every fresh executor of `npm run demo` printed pg's DeprecationWarning "Calling client.query()
 * when the client is already executing a query". The queueing code is DBOS 5.3's system database pool: on
 * each new connection it sends `SET idle_in_transaction_session_timeout` without waiting, and the first
 * borrower's query queues behind it. The stack now gives DBOS that setting in the URL (dbosUrl.ts), which
 * DBOS checks before sending its own. The plain URL is run too: it still warns, so this test can fail.
 */
describe('a DBOS executor started by the stack', () => {
  let tdb: TestDatabase;
  const app = uniqueName('pgdep');
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  const warnsOnStart = async (databaseUrl: string, executorId: string) => {
    const e = await startAgentExecutor({
      databaseUrl,
      applicationName: app,
      applicationVersion: 'v1',
      executorId,
      env: { AFTERLIFE_KIT: 'off' },
    });
    await e.start(`${executorId}-wf`, { steps: 1, stepMs: 10 });
    await e.stop();
    return /client is already executing a query/.test(e.output.join(''));
  };

  it('prints no pg DeprecationWarning with the stack’s URL (and did with the plain one)', { timeout: 90_000 }, async () => {
    expect(await warnsOnStart(tdb.url, 'exec-plain')).toBe(true);
    expect(await warnsOnStart(dbosSystemUrl(tdb.url), 'exec-stack')).toBe(false);
  });
});
