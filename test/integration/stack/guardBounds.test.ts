import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inline } from '../../../cli/format.js';
import { render } from '../../../cli/logLines.js';
import { formatLogLine, makeLogger } from '../../../packages/executor/src/log.js';
import { type GuardAll, guardAll } from '../../../scripts/stack/guardAll.js';
import { guardBounds } from '../../../scripts/stack/index.js';
import { startMemoryBridge, type MemoryBridge } from '../../../scripts/stack/memoryBridge.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * `npm start` guards what a registry row names only within bounds: a name the plane's configuration refuses
 * is never guarded, at most LOCAL_MAX_APPLICATIONS are guarded at once (a WARNING names the bound), and an
 * application whose kits are all dead or drained for LOCAL_GUARD_IDLE_MS has its set stopped — its
 * processes gone, its place free for the next. Real registry rows in a real database, real function
 * processes (dist/), the guard as the stack runs it. The rows are written as anyone holding the kit's
 * grants could write them.
 */
const GOOD = 'a-good';
const OVER = 'b-over-bound';
const COLON = 'bad:colon';
// An OSC title set, a line erase and a forged line: what reached the terminal raw.
const CONTROLS = 'evil\u001b]0;owned\u0007\u001b[2K\nPASS  pooler';
const CONTROL_CHARS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

describe('npm start guards registry names within bounds, and stops what it started', () => {
  let db: TestDatabase;
  let bridge: MemoryBridge;
  let guard: GuardAll | undefined;
  const lines: string[] = [];
  const logger = makeLogger((line) => lines.push(formatLogLine(line)), { component: 'stack' }, 'INFO');

  beforeAll(async () => {
    db = await createTestDatabase();
    bridge = await startMemoryBridge({ project: 'afterlife-local', logger });
  });

  afterAll(async () => {
    await guard?.stop();
    await bridge?.close();
    await db?.drop();
  });

  it('LOCAL_MAX_APPLICATIONS and LOCAL_GUARD_IDLE_MS are read as bounded integers, a bad value refused', () => {
    expect(guardBounds({})).toEqual({ maxApplications: 4, idleStopMs: 300_000 });
    expect(guardBounds({ LOCAL_MAX_APPLICATIONS: '2', LOCAL_GUARD_IDLE_MS: '0' })).toEqual({ maxApplications: 2, idleStopMs: 0 });
    for (const bad of ['0', '51', '-1', '2.5', ' 3', 'many']) {
      expect(() => guardBounds({ LOCAL_MAX_APPLICATIONS: bad }), bad).toThrow(
        /LOCAL_MAX_APPLICATIONS must be a plain decimal integer from 1 to 50/,
      );
    }
  });

  it('refuses names the plane refuses, stops at the bound with a WARNING, and stops an idle set', { timeout: 120_000 }, async () => {
    for (const [app, id] of [
      [GOOD, 'k-good'],
      [OVER, 'k-over'],
      [COLON, 'k-colon'],
      [CONTROLS, 'k-controls'],
    ] as const) {
      await db.sql.query(
        `INSERT INTO afterlife.executors (application_name, executor_id, application_version, state) VALUES ($1, $2, 'v1', 'alive')`,
        [app, id],
      );
    }
    const first = uniqueName('demo');
    guard = guardAll({
      databaseUrl: db.url,
      dbosSchema: 'dbos',
      afterlifeSchema: 'afterlife',
      first: { applicationName: first, functions: [] },
      fnEnv: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: db.url,
        DBOS_APPLICATION_NAME: first,
        REDIS_URL: TEST_REDIS_URL,
        REDIS_KEY_PREFIX: uniqueName('guard-bounds'),
        GOOGLE_CLOUD_PROJECT: 'afterlife-local',
        PUBSUB_BRIDGE_URL: bridge.url,
        METADATA_SERVER_DETECTION: 'none',
        LOG_LEVEL: 'WARNING',
      },
      scheduleMs: 60_000,
      schedulerTimeoutMs: 90_000,
      maxApplications: 2,
      idleStopMs: 60_000,
      logger,
    });
    const g = guard;
    const names = () => g.guarded().map((a) => a.applicationName);

    await waitFor('the first application beyond the stack’s own guarded', async () => names().includes(GOOD), { timeoutMs: 40_000 });
    const warnings = await waitFor(
      'a WARNING for the bound and one for each refused name',
      async () => {
        const w = lines.filter((l) => l.includes('"severity":"WARNING"'));
        return w.length >= 3 ? w : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    expect(names()).toEqual([first, GOOD]);
    const bound = warnings.find((l) => l.includes('stack_bound_reached'));
    expect(bound).toContain(OVER);
    expect(bound).toContain('LOCAL_MAX_APPLICATIONS=2');
    expect(warnings.filter((l) => l.includes('stack_name_refused'))).toHaveLength(2);
    expect(warnings.find((l) => l.includes('stack_name_refused') && l.includes('bad:colon'))).toContain('DBOS_APPLICATION_NAME');

    // On a terminal (npm start's pretty format) not one control character of a name reaches it.
    for (const l of lines) {
      const shown = render(l, 'stack', { format: 'pretty', colour: false }) ?? '';
      expect(shown, shown).not.toMatch(CONTROL_CHARS);
    }
    const shownRefusal = lines.map((l) => render(l, 'stack', { format: 'pretty', colour: false }) ?? '').find((l) => l.includes('evil'));
    expect(shownRefusal).toContain(inline(JSON.stringify(CONTROLS)));

    // Its only kit dead long enough: its set stops (every process), and the bound lets the next one in.
    const goodSet = g.guarded().find((a) => a.applicationName === GOOD);
    const pids = (goodSet?.functions ?? []).map((f) => f.proc.child.pid ?? 0);
    expect(pids.length).toBeGreaterThan(0);
    await db.sql.query(
      `UPDATE afterlife.executors SET state = 'dead', state_changed_at = now() - interval '2 minutes' WHERE application_name = $1`,
      [GOOD],
    );
    await waitFor('the idle set stopped, every process of it gone', async () => !names().includes(GOOD) && pids.every((p) => !alive(p)), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    expect(lines.some((l) => l.includes('stack_unguarding') && l.includes(GOOD))).toBe(true);
    await waitFor('the application over the bound guarded once a place is free', async () => names().includes(OVER), { timeoutMs: 40_000 });

    // A kit of the stopped application returns while its reaper's last tick is still recent (the unguarded
    // query would not list it for two minutes): guarded again at once, once the bound has room.
    await db.sql.query(
      `UPDATE afterlife.executors SET state = 'dead', state_changed_at = now() - interval '2 minutes' WHERE application_name = $1`,
      [OVER],
    );
    await waitFor('the second idle set stopped', async () => !names().includes(OVER), { timeoutMs: 30_000, intervalMs: 100 });
    await db.sql.query(
      `UPDATE afterlife.executors SET state = 'alive', state_changed_at = now(), last_seen_at = now() WHERE application_name = $1`,
      [GOOD],
    );
    await waitFor('the returning application guarded again', async () => names().includes(GOOD), { timeoutMs: 40_000 });
    const overPids = (g.guarded().find((a) => a.applicationName === GOOD)?.functions ?? []).map((f) => f.proc.child.pid ?? 0);

    // Nothing it started outlives it.
    await g.stop();
    guard = undefined;
    expect(overPids.filter(alive)).toEqual([]);
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
