import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * Acceptance B: `npm run demo` (shortened: 6 steps of 1 s) ends with every workflow SUCCESS and a timeline
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
    if (/stack up: .*functions .*reaper/.test(out)) {
      // With the reaper in the build, nobody tells afterlife about the SIGKILL: the lapsed heartbeat does.
      expect(at(/function reaper: executor declared dead/)).toBeGreaterThan(at(/SIGKILL exec-A/));
      expect(at(/RECOVERED exec-A: .*reason heartbeat-lapsed, detected by reaper@/)).toBeGreaterThan(at(/SIGKILL exec-A/));
      expect(out).not.toMatch(/publishing the notice as `afterlife recover` would/);
    } else {
      console.warn('!!! this build has no reaper target: the demo published the SIGKILL death notice itself');
    }
    const kit = /afterlife kit attached/.test(out);
    if (kit) {
      // The kit drains on SIGTERM: its own log events, and the registry moving exec-B through draining.
      expect(at(/exec-B: .*drain/i)).toBeGreaterThan(at(/SIGTERM exec-B/));
      expect(at(/registry: exec-B → (draining|drained)/)).toBeGreaterThan(at(/SIGTERM exec-B/));
    } else {
      console.warn('!!! the example app ran WITHOUT the executor kit: the SIGTERM drain part of the demo is not exercised');
      expect(at(/exec-B exited .* no kit, so no drain/)).toBeGreaterThan(at(/SIGTERM exec-B/));
    }
    expect(at(/ALL 20 WORKFLOWS SUCCESS/)).toBe(timeline.length - 2);
    expect(out).toMatch(/checkpointed steps that ran again: 0$/m);

    const rows = await tdb.sql.query<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM dbos.workflow_status WHERE application_name = $1 GROUP BY 1`,
      [app],
    );
    expect(rows.rows).toEqual([{ status: 'SUCCESS', n: 20 }]);
  }, 150_000);
});
