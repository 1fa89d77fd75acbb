import { DBOSClient } from '@dbos-inc/dbos-sdk';
import { appFixture, type AppFixture, type AppFixtureOptions, need } from './appFixture.js';
import { serveExecutorDeath } from './executorDeath.js';
import type { serve } from './cloudEvents.js';

/**
 * The repair suites' set-up (test/integration/fork/): a test database and a Runtime for one app
 * (appFixture), the example app's `divergent_choice` table (which tool a divergent workflow picks), a DBOS
 * client for the app, and with `serve` the executorDeath function on the runtime. Everything started
 * through it is stopped afterwards. Registers its own beforeAll/afterAll; call it in a describe body.
 */
/** A DBOS client for one app, as apps and the repair code hold one (a small pool: tests run many). */
export async function dbosClient(url: string, applicationName: string): Promise<DBOSClient> {
  return DBOSClient.create({ systemDatabaseUrl: url, applicationName, systemDatabasePoolSize: 2 });
}

export interface RepairFixture extends AppFixture {
  readonly client: DBOSClient;
  /** The served executorDeath (only with `serve: true`). */
  readonly server: Awaited<ReturnType<typeof serve>>;
}

export interface RepairFixtureOptions extends Omit<AppFixtureOptions, 'setup'> {
  /** Create public.divergent_choice, which the example app's divergent workflows read (default true). */
  divergentChoice?: boolean;
  /** Serve executorDeath on the fixture's runtime (default false). */
  serve?: boolean;
  /** Run in beforeAll once the client exists (enqueue, start executors, make them diverge). */
  setup?: (f: RepairFixture) => Promise<void>;
}

export function repairFixture(prefix: string, o: RepairFixtureOptions = {}): RepairFixture {
  const { divergentChoice = true, serve: served = false, setup, ...rest } = o;
  let client: DBOSClient | undefined;
  let server: Awaited<ReturnType<typeof serve>> | undefined;
  const base = appFixture(prefix, {
    ...rest,
    setup: async (f) => {
      if (divergentChoice) await f.tdb.sql.query('CREATE TABLE public.divergent_choice (key text PRIMARY KEY, value text NOT NULL)');
      if (served) server = await serveExecutorDeath(f);
      const c = await dbosClient(f.tdb.url, f.app);
      client = c;
      f.onClose(() => c.destroy());
      await setup?.(f as RepairFixture);
    },
  });
  Object.defineProperty(base, 'client', { get: () => need(client, 'DBOS client') });
  return Object.defineProperty(base, 'server', { get: () => need(server, 'served executorDeath') }) as RepairFixture;
}
