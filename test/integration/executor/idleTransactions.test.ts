import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { kitEnv } from '../../helpers/kit.js';

/**
 * The kit asks, at attach, what `idle_in_transaction_session_timeout` DBOS's own system-database
 * connections run with, and warns once when it is 0: then a host lost inside a transaction keeps its row
 * locks for as long as its session lives (docs/lost-transactions.md). Real DBOS executors with the kit:
 * one whose URL sets the limit to 0 (DBOS then leaves it alone, so the session has none), one at DBOS's
 * own default (it sets 60 s on every connection of its pool), one whose URL sets 30 s.
 */
const WARNING = 'idle_transactions_unbounded';
const ATTACHED = 'executor kit attached';

describe('kit: the idle-in-transaction limit of DBOS’s connections, checked at attach', () => {
  let tdb: TestDatabase;
  const app = uniqueName('app-idletx');
  const started: ExecutorHandle[] = [];
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await Promise.all(started.map((e) => e.stop()));
    await tdb?.drop();
  });

  /** Starts an executor with the kit on `url`; resolves with its output once the attach line is out. */
  const attach = async (executorId: string, url: string): Promise<string> => {
    const e = await startExecutor({ databaseUrl: url, applicationName: app, applicationVersion: 'v1', executorId, env: kitEnv() });
    started.push(e);
    return waitFor(`${executorId}'s kit attached`, async () => {
      const out = e.output.join('');
      return out.includes(ATTACHED) ? out : undefined;
    });
  };
  const withOptions = (ms: number) => {
    const u = new URL(tdb.url);
    u.searchParams.set('options', `-c idle_in_transaction_session_timeout=${ms}`);
    return u.toString();
  };

  it('warns once, before the attach line, when the limit is 0, saying what to set', async () => {
    const out = await attach('exec-unbounded', withOptions(0));
    const warnings = out.split('\n').filter((l) => l.includes(WARNING));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('ALTER ROLE');
    expect(warnings[0]).toContain('docs/lost-transactions.md');
    expect(out.indexOf(WARNING)).toBeLessThan(out.indexOf(ATTACHED));
    expect(out).toContain('"idleInTransactionTimeoutMs":0');
  });

  it("says nothing at DBOS's own default (60 s on its pool) or when the URL sets a limit, and the attach line says the value", async () => {
    const byDefault = await attach('exec-default', tdb.url);
    expect(byDefault).not.toContain(WARNING);
    expect(byDefault).toContain('"idleInTransactionTimeoutMs":60000');
    const bounded = await attach('exec-bounded', withOptions(30_000));
    expect(bounded).not.toContain(WARNING);
    expect(bounded).toContain('"idleInTransactionTimeoutMs":30000');
  });
});
