import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * `npm run demo` (shortened: 6 steps of 1 s) ends with every workflow SUCCESS and a timeline
 * that shows exec-A's SIGKILL and its recovery, and exec-B's SIGTERM and drain. Runs the built script
 * against a test database so the end state can be checked in Postgres too.
 */
const DEMO = fileURLToPath(new URL('../../../dist/scripts/demo.js', import.meta.url));

describe('npm run demo', () => {
  let tdb: TestDatabase;
  const app = uniqueName('demo');
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  it('survives a SIGKILL and a SIGTERM: every workflow SUCCESS, recoveries and the drain in the timeline', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: tdb.url,
      REDIS_URL: TEST_REDIS_URL,
      DBOS_APPLICATION_NAME: app,
      DEMO_STEP_MS: '1000',
      DEMO_STEPS: '6',
      DEMO_TIMEOUT_S: '90',
      METADATA_SERVER_DETECTION: 'none',
    };
    const child = spawn(process.execPath, [DEMO], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    console.info(out);
    expect(code, out).toBe(0);

    const timeline = out.split('\n').filter((l) => /^\+\s*\d+\.\ds {2}/.test(l));
    const at = (re: RegExp) => timeline.findIndex((l) => re.test(l));
    expect(at(/SIGKILL exec-A — \d+ workflows left PENDING/)).toBeGreaterThanOrEqual(0);
    expect(at(/RECOVERED exec-A: recovery #\d+ re-enqueued [1-9]\d* workflows/)).toBeGreaterThan(at(/SIGKILL exec-A/));
    expect(at(/SIGTERM exec-B \(scale-in\)/)).toBeGreaterThan(at(/SIGKILL exec-A/));
    // This build has the reaper target and the example app attaches the kit: both halves of the demo
    // must really run, not their fallbacks.
    expect(out).toMatch(/stack up: .*functions .*reaper/);
    for (const e of ['exec-A', 'exec-B', 'exec-C'])
      expect(out).toMatch(new RegExp(`${e} up \\(DBOS executor, version v1, afterlife kit attached\\)`));

    // SIGKILL: nobody tells afterlife; the lapsed heartbeat does, through the reaper.
    expect(at(/function reaper: executor declared dead/)).toBeGreaterThan(at(/SIGKILL exec-A/));
    expect(at(/RECOVERED exec-A: .*reason heartbeat-lapsed, detected by reaper@/)).toBeGreaterThan(at(/SIGKILL exec-A/));
    expect(out).not.toMatch(/publishing the notice as `afterlife-plane recover` would/);
    expect(out).not.toMatch(/this build has no reaper target/);

    // SIGTERM: exec-B's kit drains (its own log events, the registry through draining) and hands what it
    // could not finish to recovery with its own notice, or finishes everything.
    const sigterm = at(/SIGTERM exec-B \(scale-in\)/);
    expect(at(/exec-B: .*drain/i)).toBeGreaterThan(sigterm);
    expect(at(/registry: exec-B → (draining|drained)/)).toBeGreaterThan(sigterm);
    expect(out).not.toMatch(/no kit, so no drain/);
    expect(out).not.toMatch(/with no notice from it: publishing one/);
    // Its own notice, or the reaper a tick after the kit let go of its lock and key on the way out (the
    // reaper declares a crash in about a second now): either recovery is the same idempotent statement.
    const handedOver = at(
      /RECOVERED exec-B: .*reason (sigterm|drained, detected by afterlife-executor:exec-B|heartbeat-lapsed, detected by reaper@)/,
    );
    const finished = at(/exec-B finished everything it held before exiting/);
    expect(Math.max(handedOver, finished), 'exec-B either handed its leftovers over itself or finished them').toBeGreaterThan(sigterm);
    expect(at(/ALL 20 WORKFLOWS SUCCESS/)).toBe(timeline.length - 2);
    expect(out).toMatch(/checkpointed steps that ran again: 0$/m);

    const rows = await tdb.sql.query<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM dbos.workflow_status WHERE application_name = $1 GROUP BY 1`,
      [app],
    );
    expect(rows.rows).toEqual([{ status: 'SUCCESS', n: 20 }]);
  }, 150_000);
});
