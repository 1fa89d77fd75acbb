import type { Redis } from 'ioredis';
import pg from 'pg';
import { registerAlive, setState, type ExecutorState } from '../db/queries/executors.js';
import { findDrainRequest } from '../db/queries/drainRequests.js';
import { createDb, type Db } from '../db/pool.js';
import { pendingByVersion } from '../dbos/recovery.js';
import { AfterlifeError } from '../errors.js';
import { deathNotice, type DeathReason } from '../events/deathNotice.js';
import { createPubSubPublisher, publishDeathNotice, type Publisher } from '../events/publisher.js';
import { heartbeatKey, type HeartbeatValue } from '../heartbeat/index.js';
import { holdExit, withTimeout } from '../lifecycle/shutdown.js';
import { createRedis } from '../lock/redis.js';
import { consoleLogger, type Logger } from '../log.js';
import { dbosApp, type DbosApp } from './dbosInternals.js';

/**
 * The executor kit: what a launched DBOS app attaches so that shutdowns and deploys stop intake, let what
 * can finish finish, and hand the rest to recovery at once (DESIGN.md, failure 2).
 *
 *   heartbeat   Redis key `{prefix}:{app}:hb:{executorId}`, PX TTL, a beat every TTL/3 with state + inFlight,
 *               kept up until the very end of a drain (state `draining`), then deleted
 *   SIGTERM     mark draining (synchronously) → stop dequeues → wait for in-flight work up to the budget →
 *               death notice if any of its workflows are still PENDING → delete the heartbeat → exit
 *   drain       a drain request for its ID or version (Postgres, polled each beat) → the same, with a long
 *               budget → `drained`, then idle (or exit); it always exits when work outlived the budget
 *
 * Nothing here is allowed to crash the app: Redis, Postgres and Pub/Sub failures are logged and bounded.
 */
export const CLOUD_RUN_GRACE_MS = 10_000;
export const DEFAULT_SHUTDOWN_MARGIN_MS = 2_000;
export const DEFAULT_HEARTBEAT_TTL_MS = 15_000;
export const DEFAULT_PUBLISH_TIMEOUT_MS = 1_000;
/** Whatever happens, the process exits this long before the grace ends (SIGKILL would lose the exit code). */
const HARD_EXIT_BEFORE_GRACE_MS = 300;
/** Of the drain budget, kept for the PENDING count, the death notice, the heartbeat delete and the exit. */
export const DEFAULT_HANDOVER_RESERVE_MS = 1_500;
const STEP_TIMEOUT_MS = 1_000;

export type KitState = 'alive' | 'draining' | 'drained' | 'exiting';

export interface ExecutorKitOptions {
  /** Where afterlife's schema and DBOS's system tables live (usually the DBOS system database). */
  databaseUrl: string;
  /** Defaults to the DBOS app's `name`. */
  applicationName?: string;
  dbosSchema?: string;
  afterlifeSchema?: string;
  /** Heartbeats need Redis; without it the kit still drains and publishes (logged as degraded). */
  redisUrl?: string;
  /** PEM CA bundle for a rediss:// redisUrl (Memorystore's server CA; REDIS_CA_CERT). */
  redisTlsCa?: string;
  redis?: Redis;
  keyPrefix?: string;
  heartbeatTtlMs?: number;
  /** `pubsub`: the real client (PUBSUB_EMULATOR_HOST is honoured); `none`: no death notices (the reaper finds them). */
  publisher?: Publisher | 'pubsub' | 'none';
  project?: string;
  topic?: string;
  publishTimeoutMs?: number;
  /** DBOS's default executor ID `local` is refused unless this is set: a shared ID recovers live siblings' work. */
  allowLocalExecutorId?: boolean;
  /** Time between SIGTERM and SIGKILL (Cloud Run: 10 s). */
  shutdownGraceMs?: number;
  /** Safety margin: the SIGTERM drain budget (signal → exit) is grace − margin, 8 s on Cloud Run. */
  shutdownMarginMs?: number;
  /** Of that budget, kept for the death notice, the heartbeat delete and the exit; the rest waits for work. */
  handOverReserveMs?: number;
  /** Install SIGTERM/SIGINT handlers (default true). */
  handleSignals?: boolean;
  /**
   * After a planned drain, exit instead of staying up idle (default false). A drain whose budget ran out
   * with workflows still PENDING or running exits regardless (see `drain`).
   */
  exitAfterPlannedDrain?: boolean;
  logger?: Logger;
}

export interface ExecutorKit {
  readonly executorId: string;
  readonly applicationName: string;
  readonly applicationVersion: string;
  readonly state: KitState;
  /** True from the first moment of a drain: the app should refuse new work (answer 503). */
  readonly draining: boolean;
  /** Resolves when a drain (planned or signalled) has finished waiting for in-flight work. */
  readonly drained: Promise<void>;
  /** Drain now, as a drain request would. */
  drain(budgetMs: number): Promise<void>;
  /** Stops beating and closes the kit's connections; DBOS is left alone. For tests and custom shutdowns. */
  close(): Promise<void>;
}

export class ExecutorIdError extends AfterlifeError {
  constructor(message: string) {
    super(message, 'executor_id', 'permanent');
  }
}

export async function attachExecutor(options: ExecutorKitOptions): Promise<ExecutorKit> {
  const app = await dbosApp();
  if (!app.executorId || (app.executorId === 'local' && !options.allowLocalExecutorId)) {
    throw new ExecutorIdError(
      `executor ID "${app.executorId}" is DBOS's shared default: set DBOSConfig.executorID or DBOS__VMID to a unique ` +
        `value per process (e.g. the Cloud Run instance ID), or pass allowLocalExecutorId for a single-process dev setup`,
    );
  }
  const applicationName = options.applicationName ?? app.applicationName;
  if (!applicationName) throw new ExecutorIdError('attachExecutor: applicationName is unknown; pass it explicitly');
  const kit = new Kit(app, applicationName, options);
  await kit.start();
  return kit;
}

class Kit implements ExecutorKit {
  readonly executorId: string;
  readonly applicationVersion: string;
  state: KitState = 'alive';
  private readonly log: Logger;
  private readonly db: Db;
  private readonly pool: pg.Pool;
  private readonly redis: Redis | undefined;
  private readonly ownsRedis: boolean;
  private publisher: Publisher | undefined;
  private readonly ttlMs: number;
  private readonly key: string;
  private readonly startedAt = new Date();
  private beatTimer: NodeJS.Timeout | undefined;
  /** Bound on one beat, retry included: a hung Redis must not hold up attachExecutor or pile up beats. */
  private readonly beatTimeoutMs: number;
  private polling: Promise<void> | undefined;
  private drainPromise: Promise<void> | undefined;
  private resolveDrained!: () => void;
  readonly drained = new Promise<void>((r) => (this.resolveDrained = r));
  private terminating = false;
  private fastPath!: () => void;
  private readonly fastPathRequested = new Promise<void>((r) => (this.fastPath = r));
  private readonly onSignal = (sig: NodeJS.Signals) => this.terminate(sig);
  private closed = false;
  /** In-flight count from Postgres, used only when DBOS's internal map is unreachable. */
  private dbInFlight = 0;

  constructor(
    private readonly app: DbosApp,
    readonly applicationName: string,
    private readonly o: ExecutorKitOptions,
  ) {
    this.executorId = app.executorId;
    this.applicationVersion = app.applicationVersion;
    this.log = (o.logger ?? consoleLogger({ component: 'afterlife-executor' })).child({ executorId: this.executorId, applicationName });
    this.ttlMs = o.heartbeatTtlMs ?? DEFAULT_HEARTBEAT_TTL_MS;
    this.beatTimeoutMs = Math.max(100, Math.floor(this.ttlMs / 3));
    this.key = heartbeatKey(applicationName, this.executorId, o.keyPrefix);
    // Small and separate from DBOS's pool: registry rows, drain polls and one count at shutdown.
    this.pool = new pg.Pool({ connectionString: o.databaseUrl, max: 2, idleTimeoutMillis: 10_000, connectionTimeoutMillis: 2_000, application_name: `afterlife_kit_${this.executorId}`.slice(0, 63) });
    this.db = createDb(this.pool, 2, { dbosSchema: o.dbosSchema ?? 'dbos', afterlifeSchema: o.afterlifeSchema ?? 'afterlife', logger: this.log, budgetWaitMs: 2_000 });
    this.redis = o.redis ?? (o.redisUrl ? createRedis(o.redisUrl, { tlsCa: o.redisTlsCa }) : undefined);
    this.ownsRedis = !o.redis && this.redis !== undefined;
  }

  get draining(): boolean {
    return this.state !== 'alive';
  }

  async start(): Promise<void> {
    if (this.o.handleSignals !== false) {
      // Prepended: functions-framework's listener calls process.exit() synchronously, so ours must run
      // first to hold that exit — also when the app attaches after the framework registered (after listen()).
      process.prependListener('SIGTERM', this.onSignal);
      process.prependListener('SIGINT', this.onSignal);
    }
    if (this.o.publisher === 'pubsub') this.publisher = await createPubSubPublisher(this.o.project);
    else if (this.o.publisher && this.o.publisher !== 'none') this.publisher = this.o.publisher;
    if (!this.redis) this.log.warn('no Redis: no heartbeat; a SIGKILL of this executor is found only by the reaper without heartbeat evidence');
    if (!this.publisher) this.log.warn('no publisher: death notices are not sent; leftovers wait for the reaper');

    await guarded(this.log, 'register executor', () =>
      registerAlive(this.db, {
        applicationName: this.applicationName,
        executorId: this.executorId,
        applicationVersion: this.applicationVersion,
        startedAt: this.startedAt,
        heartbeats: this.redis !== undefined,
      }),
    );
    await this.beat();
    // The beat and the Postgres poll are independent, so a slow database never delays a beat. Beats may
    // overlap (each is bounded by TTL/3, so at most two); a poll still running is not started again.
    this.beatTimer = setInterval(() => {
      void this.beat();
      this.polling ??= this.poll().finally(() => (this.polling = undefined));
    }, this.beatTimeoutMs);
    this.log.info('executor kit attached', { applicationVersion: this.applicationVersion, heartbeatTtlMs: this.ttlMs, key: this.key });
  }

  /**
   * Each beat period: the fallback in-flight count and, while alive, a look for a drain request addressed
   * to us. It keeps running during a drain (for the count), but a draining executor has nothing to look for.
   */
  private async poll(): Promise<void> {
    if (this.closed) return;
    if (this.app.runningCount() === undefined) {
      const pending = await guarded(this.log, 'count in-flight workflows', () => pendingByVersion(this.db, this.applicationName, this.executorId));
      if (pending) this.dbInFlight = pending.reduce((n, p) => n + p.count, 0);
    }
    if (this.closed || this.state !== 'alive') return;
    const req = await guarded(this.log, 'poll drain requests', () =>
      findDrainRequest(this.db, { applicationName: this.applicationName, executorId: this.executorId, applicationVersion: this.applicationVersion }),
    );
    if (req && this.state === 'alive') {
      this.log.notice('drain requested', { requestId: req.id, budgetMs: req.budgetMs });
      void this.drain(req.budgetMs);
    }
  }

  private value(): HeartbeatValue {
    return {
      executorId: this.executorId,
      applicationName: this.applicationName,
      applicationVersion: this.applicationVersion,
      state: this.state === 'drained' ? 'drained' : this.state === 'alive' ? 'alive' : 'draining',
      startedAt: this.startedAt.toISOString(),
      beatAt: new Date().toISOString(),
      inFlight: this.app.runningCount() ?? this.dbInFlight,
    };
  }

  /**
   * Writes the heartbeat, retrying once, all within TTL/3 (a client that queues commands while offline
   * would otherwise hang here); a failed beat is logged and never fatal (the TTL covers a miss). Nothing
   * is written once close() has begun: its DEL must be the last word. A SET already sent before it is
   * harmless, because one connection executes its commands in order.
   */
  private async beat(): Promise<void> {
    const redis = this.redis;
    if (!redis) return;
    const deadline = Date.now() + this.beatTimeoutMs;
    for (let attempt = 1; ; attempt++) {
      if (this.closed) return;
      try {
        await withTimeout(redis.set(this.key, JSON.stringify(this.value()), 'PX', this.ttlMs), Math.max(1, deadline - Date.now()));
        return;
      } catch (err) {
        const pause = Math.min(250, this.ttlMs / 10);
        if (attempt === 2 || deadline - Date.now() <= pause) {
          this.log.warn('heartbeat write failed; next beat retries', { err, event: 'heartbeat_failed' });
          return;
        }
        await sleep(pause);
      }
    }
  }

  private registry(state: ExecutorState, reason?: string): Promise<void> {
    return guarded(this.log, `registry → ${state}`, () =>
      setState(this.db, { applicationName: this.applicationName, executorId: this.executorId, state, applicationVersion: this.applicationVersion, ...(reason ? { reason, detectedBy: this.executorId } : {}) }),
    ).then(() => undefined);
  }

  /**
   * A planned drain: stop intake, finish what we hold within the budget, hand the rest over, then idle —
   * unless work outlived the budget. DBOS is shut down by then, but the code of a workflow it stopped
   * waiting for still runs in this process, while the `drained` notice has recovery run it elsewhere: the
   * same step would run twice at once, and this copy can no longer record anything. Exiting stops it, so
   * leftovers always exit (after the notice and the heartbeat delete), whatever `exitAfterPlannedDrain` says.
   */
  drain(budgetMs: number): Promise<void> {
    this.drainPromise ??= (async () => {
      const started = Date.now();
      this.state = 'draining';
      await Promise.all([this.beat(), this.registry('draining', 'drain-request')]);
      try {
        await this.app.shutdown(budgetMs);
      } catch (err) {
        this.log.error('DBOS shutdown failed during drain', { err });
      }
      if (this.terminating) return; // a SIGTERM took over and finishes the job
      const pending = await this.handOver('drained');
      if (this.terminating) return; // a SIGTERM arrived during the hand-over; its path exits
      const running = this.app.runningCount() ?? 0;
      // Unknown (Postgres could not say) counts as left over: staying up is only safe when nothing is.
      const leftovers = pending !== 0 || running > 0;
      this.state = 'drained';
      this.resolveDrained();
      if (leftovers) {
        // The notice is out, so recovery may already be running this work elsewhere: nothing (a beat, a
        // registry write against a slow database) may stand between it and the exit. The registry write
        // runs beside the close, capped below it.
        this.log.notice('work outlived the drain budget: exiting, so that it stops here while recovery runs it elsewhere', { pending: pending ?? 'unknown', running, event: 'executor_drain_exit' });
        const exit = holdExit();
        await Promise.all([withTimeout(this.registry('drained', 'drain-request'), 500).catch(() => undefined), this.close()]);
        exit(0);
        return;
      }
      await Promise.all([this.beat(), this.registry('drained', 'drain-request')]);
      this.log.notice('drained', { elapsedMs: Date.now() - started, pending: pending ?? 'unknown', running, event: 'executor_drained' });
      if (this.o.exitAfterPlannedDrain && !this.terminating) {
        const exit = holdExit();
        await this.close();
        exit(0);
      }
    })();
    return this.drainPromise;
  }

  /**
   * SIGTERM/SIGINT. Everything before the first await is synchronous, so the draining flag is set and the
   * framework's exit is held before any other listener runs. A second signal skips the wait.
   */
  private terminate(sig: NodeJS.Signals): void {
    if (this.terminating) {
      this.log.warn(`second ${sig}: fast path`);
      this.fastPath();
      return;
    }
    this.terminating = true;
    const received = Date.now();
    const wasDrained = this.state === 'drained';
    this.state = 'exiting';
    const exit = holdExit();
    const grace = this.o.shutdownGraceMs ?? CLOUD_RUN_GRACE_MS;
    const margin = Math.min(this.o.shutdownMarginMs ?? DEFAULT_SHUTDOWN_MARGIN_MS, grace / 2);
    const hard = setTimeout(() => {
      this.log.error('shutdown grace nearly over: exiting now', { event: 'shutdown_forced' });
      exit(1);
    }, Math.max(0, grace - HARD_EXIT_BEFORE_GRACE_MS));
    const budgetMs = grace - margin;
    const waitMs = Math.max(0, budgetMs - Math.min(this.o.handOverReserveMs ?? DEFAULT_HANDOVER_RESERVE_MS, budgetMs / 2));
    this.log.notice(`${sig}: draining`, { budgetMs, waitMs, event: 'executor_draining' });
    void (async () => {
      // The beat timer keeps running (state draining) until close(): a key that lapsed mid-drain would let
      // the reaper declare this working executor dead and run its steps a second time elsewhere.
      const announce = Promise.all([this.beat(), this.registry('draining', 'sigterm')]);
      if (!wasDrained) {
        const stopped = this.app.shutdown(waitMs).then(
          () => 'stopped' as const,
          (err: unknown) => (this.log.error('DBOS shutdown failed', { err }), 'failed' as const),
        );
        const outcome = await Promise.race([stopped, this.fastPathRequested.then(() => 'fast' as const), sleep(waitMs + 250).then(() => 'timeout' as const)]);
        this.log.info('in-flight wait over', { outcome, elapsedMs: Date.now() - received });
      }
      // From here every step shares what is left of the budget, so the exit lands inside it (and, whatever
      // happens, the hard timer still beats SIGKILL).
      const deadline = received + budgetMs;
      const left = (capMs: number) => Math.max(50, Math.min(capMs, deadline - Date.now()));
      await withTimeout(announce, left(STEP_TIMEOUT_MS)).catch(() => undefined);
      this.resolveDrained();
      await this.handOver('sigterm', left);
      await withTimeout(this.close(left), left(STEP_TIMEOUT_MS)).catch(() => undefined);
      clearTimeout(hard);
      this.log.notice('exiting', { elapsedMs: Date.now() - received, event: 'executor_exit' });
      exit(0);
    })();
  }

  /**
   * If any of our workflows is still PENDING, say so with a death notice, so recovery hands them to a live
   * executor now instead of after a heartbeat lapse. When Postgres can't tell, publish anyway: a notice for
   * an executor with nothing left costs one no-op recovery. Returns the PENDING count (undefined: unknown).
   */
  private async handOver(reason: Extract<DeathReason, 'sigterm' | 'drained'>, left: (capMs: number) => number = (c) => c): Promise<number | undefined> {
    const pending = await withTimeout(pendingByVersion(this.db, this.applicationName, this.executorId), left(STEP_TIMEOUT_MS)).catch((err: unknown) => {
      this.log.warn('could not count PENDING workflows; publishing the death notice anyway', { err });
      return undefined;
    });
    const count = pending?.reduce((n, p) => n + p.count, 0);
    if (count === 0) {
      this.log.info('nothing left PENDING: no death notice needed');
      if (reason === 'sigterm') await withTimeout(this.registry('dead', 'sigterm'), left(STEP_TIMEOUT_MS)).catch(() => undefined);
      return 0;
    }
    const versions = [...new Set((pending ?? []).map((p) => p.applicationVersion).filter((v): v is string => v !== null))];
    if (!this.publisher) {
      this.log.warn('workflows left PENDING and no publisher: the reaper will recover them', { pending: count });
      return count;
    }
    try {
      // Inside the try: a notice that fails validation must not stop the shutdown that follows.
      const notice = deathNotice({
        executorId: this.executorId,
        applicationName: this.applicationName,
        ...(versions.length ? { applicationVersions: versions } : {}),
        reason,
        detectedBy: `afterlife-executor:${this.executorId}`,
      });
      const id = await withTimeout(publishDeathNotice(this.publisher, this.o.topic ?? 'executor-deaths', notice), left(this.o.publishTimeoutMs ?? DEFAULT_PUBLISH_TIMEOUT_MS));
      this.log.notice('death notice published', { messageId: id, pending: count, reason, event: 'death_notice_published' });
    } catch (err) {
      this.log.error('death notice not published; the reaper will find this executor by its heartbeat', { err, pending: count });
    }
    return count;
  }

  async close(left: (capMs: number) => number = (c) => c): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.beatTimer) clearInterval(this.beatTimer);
    process.off('SIGTERM', this.onSignal);
    process.off('SIGINT', this.onSignal);
    const redis = this.redis;
    // Deleting the key is the "clean exit" signal: a key that expires instead means a crash. `closed` is
    // set first, so no beat writes after it.
    if (redis) await withTimeout(redis.del(this.key), left(500)).catch((err: unknown) => this.log.warn('heartbeat delete failed; it expires with its TTL', { err }));
    // Polite closes, bounded: at exit the sockets are dropped anyway, which Postgres and Redis tolerate.
    await Promise.allSettled([
      this.publisher ? withTimeout(this.publisher.close(), left(500)) : undefined,
      this.ownsRedis && redis ? withTimeout(redis.quit(), left(300)).catch(() => redis.disconnect()) : undefined,
      withTimeout(this.pool.end(), left(500)),
    ]);
  }
}

async function guarded<T>(log: Logger, what: string, fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await withTimeout(fn(), 5_000);
  } catch (err) {
    log.warn(`${what} failed (not fatal)`, { err });
    return undefined;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
