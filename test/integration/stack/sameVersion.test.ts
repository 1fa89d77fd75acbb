import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatLogLine, makeLogger } from '../../../packages/executor/src/log.js';
import { type GuardAll, guardAll } from '../../../scripts/stack/guardAll.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * Two applications sharing `npm start`'s database with one version string, as DBOS's own two demo apps do
 * ("0.1.0" each). DBOS 5.3 refuses the second: its launch throws "Application version '0.1.0' is already
 * registered by application …" (application_versions.version_name is still unique across applications).
 * An app shaped like DBOS's starters logs that and runs on, DBOS half started and no kit attached, so
 * nothing would recover its deaths. The stack says so, naming the fix; with its own version it launches.
 */
const SWALLOWING_APP = fileURLToPath(new URL('../../helpers/swallowingApp.mjs', import.meta.url));
const VERSION = '0.1.0';

describe('two applications, one version string, one database', () => {
  let db: TestDatabase;
  let guard: GuardAll | undefined;
  const apps: ChildProcess[] = [];
  let first: ExecutorHandle | undefined;
  const lines: string[] = [];
  const logger = makeLogger((line) => lines.push(formatLogLine(line)), { component: 'stack' }, 'INFO');

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await guard?.stop();
    await first?.stop();
    for (const a of apps) a.kill('SIGKILL');
    await db?.drop();
  });

  const launch = (name: string, version: string, executorId: string) => {
    const child = spawn(process.execPath, [SWALLOWING_APP], {
      env: { ...process.env, APP_NAME: name, APP_VERSION: version, DBOS__VMID: executorId, DBOS_SYSTEM_DATABASE_URL: db.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    apps.push(child);
    let out = '';
    child.stdout?.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr?.on('data', (b: Buffer) => (out += b.toString()));
    return waitFor(`${name} to launch or fail`, async () => /LAUNCHED|LAUNCH FAILED.*/.exec(out)?.[0] ?? undefined, { timeoutMs: 30_000 });
  };

  it(
    'DBOS refuses the second; the stack WARNs about the DBOS process running without a kit, naming DBOS__APPVERSION',
    { timeout: 120_000 },
    async () => {
      const shop = uniqueName('shop-a');
      first = await startExecutor({
        databaseUrl: db.url,
        applicationName: shop,
        applicationVersion: VERSION,
        executorId: 'a-1',
        env: { AFTERLIFE_KIT: 'on', REDIS_URL: TEST_REDIS_URL, REDIS_KEY_PREFIX: uniqueName('same-version'), AFTERLIFE_PUBLISH: 'none' },
      });
      expect(first.kit).toBe(true);
      const other = uniqueName('shop-b');
      const refused = await launch(other, VERSION, 'b-1');
      expect(refused).toContain(`Application version '${VERSION}' is already registered by application '${shop}'`);

      const demo = uniqueName('demo');
      guard = guardAll({
        databaseUrl: db.url,
        dbosSchema: 'dbos',
        afterlifeSchema: 'afterlife',
        first: { applicationName: demo, functions: [] },
        fnEnv: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url, DBOS_APPLICATION_NAME: demo, REDIS_URL: TEST_REDIS_URL },
        scheduleMs: 60_000,
        schedulerTimeoutMs: 90_000,
        // Only the stack's own: this test is about the report, not about starting sets.
        maxApplications: 1,
        idleStopMs: 300_000,
        kitlessGraceMs: 0,
        logger,
      });
      const warning = await waitFor(
        'the stack to report the DBOS process without a kit',
        async () => lines.find((l) => l.includes('stack_kitless_dbos')),
        { timeoutMs: 20_000, intervalMs: 100 },
      );
      expect(warning).toContain(`dbos_transact_b-1_${VERSION}`);
      expect(warning).toContain('DBOS__APPVERSION');
      expect(warning).toContain('"severity":"WARNING"');
      // The first app's kit is registered: its sessions are not reported.
      expect(lines.filter((l) => l.includes('stack_kitless_dbos') && l.includes('dbos_transact_a-1'))).toEqual([]);

      // The fix the warning names: its own version string, and DBOS launches it.
      expect(await launch(other, '0.1.1', 'b-2')).toBe('LAUNCHED');
    },
  );
});
