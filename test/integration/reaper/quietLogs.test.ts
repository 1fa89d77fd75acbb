import { describe, expect, it } from 'vitest';
import { CONFIG_DEFAULTS } from '../../../shared/config/index.js';
import { runReaper } from '../../../shared/reaper/index.js';
import { IDLE_EVENTS, IDLE_LINES_PER_MINUTE } from '../../../shared/reaper/tickLog.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';

/**
 * Quiet logs when nothing dies (issue 20): the reaper at the defaults (tick 250 ms, heartbeat TTL 15 s, the kits' liveness
 * locks) watches three live executors, each with a PENDING workflow (so every tick reads their evidence),
 * for a full minute. Its log over that minute stays within the stated idle budget (docs/logging.md) and
 * holds only the idle events; a fourth executor SIGKILLed during the minute still gets its declaration and
 * recovery lines. It can fail: ~240 ticks ran in the window, so a line per tick would be 60 times the budget.
 */
const WINDOW_MS = 60_000;
/** The minute's summary is written by the first tick after the minute: a tick and a bit later. */
const SLACK_MS = 1_000;
const DEFAULTS = {
  REAPER_TICK_MS: String(CONFIG_DEFAULTS.REAPER_TICK_MS),
  HEARTBEAT_TTL_MS: String(CONFIG_DEFAULTS.HEARTBEAT_TTL_MS),
  BUDGET_MARGIN_MS: String(CONFIG_DEFAULTS.BUDGET_MARGIN_MS),
  // What Terraform deploys the reaper with; the invocation outlasts the window.
  FUNCTION_TIMEOUT_S: '150',
};

describe('reaper: quiet ticks are summarised, events are not', () => {
  const fx = reaperFixture('app-quiet', { env: DEFAULTS });

  it(
    `logs at most ${IDLE_LINES_PER_MINUTE} lines in a quiet minute, and a SIGKILLed executor's declaration and recovery`,
    { timeout: 180_000 },
    async () => {
      const { rt, tdb } = fx;
      const kitEnv = { HEARTBEAT_TTL_MS: DEFAULTS.HEARTBEAT_TTL_MS };
      for (const n of [1, 2, 3]) {
        const e = await fx.executor(`exec-live-${n}`, { beat: true, env: kitEnv });
        await e.start(`live-${n}`, { steps: 1, stepMs: 170_000 });
      }
      const victim = await fx.executor('exec-victim', { beat: true, env: kitEnv });
      await victim.start('victim-1', { steps: 1, stepMs: 170_000 });
      await waitFor('four PENDING workflows', async () =>
        (await workflowRows(tdb.sql, ['live-1', 'live-2', 'live-3', 'victim-1'])).every((r) => r.status === 'PENDING'),
      );

      const stop = new AbortController();
      const t0 = Date.now();
      const before = rt.logger.lines.length;
      let ticksInWindow = 0;
      const reaper = runReaper(testReaperDeps(rt), {
        signal: stop.signal,
        standby: true,
        onTick: () => void (Date.now() - t0 < WINDOW_MS && ticksInWindow++),
      });

      // A third into the minute, once the reaper has seen the victim's lock held.
      await new Promise((r) => setTimeout(r, WINDOW_MS / 3));
      victim.kill('SIGKILL');
      await victim.exited;
      const declared = await waitFor(
        'the victim declared dead',
        async () => rt.logger.lines.slice(before).find((l) => l.event === 'executor_dead' && l.executorId === 'exec-victim'),
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      // The rest of the full window, measured, and the minute's summary, written by the first tick after it.
      await waitFor('the window ends', async () => Date.now() - t0 >= WINDOW_MS + SLACK_MS, {
        timeoutMs: WINDOW_MS + 5_000,
        intervalMs: 100,
      });
      stop.abort();
      const summary = await reaper;
      if (summary.outcome !== 'completed') throw new Error('reaper skipped');

      // What production writes: LOG_LEVEL's default is INFO (the test logger keeps DEBUG too).
      const inWindow = rt.logger.lines
        .slice(before)
        .filter((l) => l.severity !== 'DEBUG' && Date.parse(l.time) - t0 <= WINDOW_MS + SLACK_MS);
      const aboutTheKill = (l: (typeof inWindow)[number]) =>
        l.executorId === 'exec-victim' ||
        (l.event === 'reaper_tick' && l.outcome === 'eventful') ||
        l.event === 'recovery' ||
        l.event === 'orphaned_version';
      const quiet = inWindow.filter((l) => !aboutTheKill(l));
      const bytes = quiet.reduce((n, l) => n + JSON.stringify(l).length + 1, 0);
      console.log(
        `[issue 20] ${ticksInWindow} ticks in ${WINDOW_MS / 1000} s; ${inWindow.length} lines in the window, ${quiet.length} of them not about the kill ` +
          `(${bytes} bytes): ${quiet.map((l) => l.event ?? l.message).join(', ')}`,
      );

      // The budget, and that the test could see a breach of it.
      expect(ticksInWindow).toBeGreaterThan(20 * IDLE_LINES_PER_MINUTE);
      expect(quiet.length).toBeLessThanOrEqual(IDLE_LINES_PER_MINUTE);
      for (const l of quiet) expect(IDLE_EVENTS as readonly unknown[], `${l.severity} ${l.message}`).toContain(l.event);
      const minute = quiet.find((l) => l.event === 'reaper_ticks');
      expect(minute, 'one reaper_ticks summary in the minute').toBeDefined();
      expect(minute).toMatchObject({ severity: 'INFO', quiet: expect.any(Number), slowestMs: expect.any(Number), candidates: 4 });
      expect(Number(minute?.ticks)).toBeGreaterThan(200);

      // The kill: declared (and recovered inline) on its own lines, at NOTICE.
      expect(declared).toMatchObject({ severity: 'NOTICE', executorId: 'exec-victim' });
      const acted = inWindow.filter((l) => l.event === 'reaper_tick' && l.outcome === 'eventful');
      expect(acted.length).toBeGreaterThanOrEqual(1);
      expect(acted.some((l) => (l.dead as { declared?: string[] }).declared?.includes('exec-victim'))).toBe(true);
      expect(summary.declaredDead).toEqual(['exec-victim']);
      await waitFor(
        'the victim’s workflow re-enqueued',
        async () => (await workflowRows(tdb.sql, ['victim-1']))[0]?.executor_id !== 'exec-victim',
        { timeoutMs: 30_000 },
      );
    },
  );
});
