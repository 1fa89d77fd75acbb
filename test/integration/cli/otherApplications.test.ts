import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StatusOutput } from '../../../cli/schemas.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { holdLiveness } from '../../helpers/liveness.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * One database, several applications (what `npm start` makes: its default `demo`, plus every application
 * whose kits register). The CLI pointed at an application with nothing says where there is something, with
 * a command that runs as printed; `status --app X` says when X itself has live kits and no plane; and every
 * command it prints quotes the name for the shell (`shop$(id)` is a name, not a command substitution).
 */
describe('the CLI in a database of several applications', () => {
  let tdb: TestDatabase;
  const app = uniqueName('empty');
  // Accepted by the plane's configuration, and a command substitution if pasted unquoted.
  const other = `${uniqueName('shop')}$(id)`;
  let env: Record<string, string>;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    env = { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app, REDIS_URL: TEST_REDIS_URL };
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  it('status and timeline name the application that has the executor, the --app command quoted; status --app shows its own UNGUARDED', async () => {
    const db = afterlifeDb(tdb.url);
    const held = await holdLiveness(db, tdb.url, { applicationName: other, executorId: 'worker-1', incarnation: 'inc-1' });
    try {
      const status = await runCli(['status'], env);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toContain(`no executors known under application ${app}`);
      expect(status.stdout).toContain(`this database has executors under ${JSON.stringify(other)} (1)`);
      expect(status.stdout).toContain(`status --app '${other}'`);
      expect(parseJson(await runCli(['status', '--json'], env), StatusOutput).elsewhere).toEqual([
        { applicationName: other, executors: 1 },
      ]);
      // Another application's UNGUARDED line quotes the name in both the variable and the command.
      expect(status.stdout).toContain(`DBOS_APPLICATION_NAME='${other}'`);
      expect(status.stdout).not.toMatch(/--app shop-[0-9a-f]+\$\(id\)/);

      const timeline = await runCli(['timeline', 'worker-1'], env);
      expect(timeline.code).toBe(1);
      expect(timeline.stderr).toContain(`no recovery timeline for "worker-1" under application "${app}"`);
      expect(timeline.stderr).toContain(
        `known under application ${JSON.stringify(other)}: afterlife-plane timeline 'worker-1' --app '${other}'`,
      );

      // The application itself: live kit, no plane ticking for it.
      const own = await runCli(['status', '--app', other], env);
      expect(own.code, own.stderr).toBe(0);
      expect(own.stdout).toContain(`UNGUARDED: 1 live kit(s) under this application, ${other} (worker-1), and no plane ticking for it`);
      expect(own.stdout).toContain(`DBOS_APPLICATION_NAME='${other}'`);
      expect(parseJson(await runCli(['status', '--app', other, '--json'], env), StatusOutput).unguarded).toEqual([
        { applicationName: other, kits: 1, executorIds: ['worker-1'] },
      ]);
      // Once a plane ticks for it, nothing is reported.
      await runCli(['reap', '--ticks', '1', '--app', other], env, 60_000);
      expect(parseJson(await runCli(['status', '--app', other, '--json'], env), StatusOutput).unguarded).toEqual([]);
    } finally {
      await held.session.end();
      await db.pool.end();
    }
  });
});
