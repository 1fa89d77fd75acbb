import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { registerAlive, setState, type ExecutorState } from '../db/queries/executors.js';
import { createDb, type Db } from '../db/pool.js';
import { findTable } from '../db/queries/schemaCheck.js';
import { ConfigError, errorMessage } from '../errors.js';
import type { Publisher } from '../events/publish.js';
import type { HeartbeatValue } from '../contract/heartbeat.js';
import type { Fence, FenceVerdict } from '../contract/fenceCheck.js';
import type { RequeuedNotice } from '../contract/requeued.js';
import { withTimeout } from '../lifecycle/orderedShutdown.js';
import { createRedis } from '../lock/redis.js';
import { consoleLogger, type Logger } from '../log.js';
import type { ExecutorKit } from './attach.js';
import type { KitCore, Left } from './core.js';
import type { DbosApp } from './dbosInternals.js';
import { plannedDrain } from './drain.js';
import { withConnectRetries } from './connectRetry.js';
import { DRAIN_BACKSTOP_POLL_MS, DrainPoller } from './drainRequests.js';
import { fenceNow, stallExitNow } from './fence.js';
import { StallWatch } from './stall.js';
import { guarded } from './guarded.js';
import { checkIdleTransactionLimit } from './idleTransactions.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TTL_MS, Heartbeat } from './heartbeat.js';
import { KitFacts } from './kitFacts.js';
import { LivenessLock } from './liveness.js';
import { type QueuePoller, queuePoller } from './pollNow.js';
import { maskUrl } from './maskUrl.js';
import { createKitPublisher, type PublishPath } from './publishPath.js';
import type { KitState } from './options.js';
import type { ResolvedKitOptions } from './resolve.js';
import { terminate } from './terminate.js';
import { NotOneSessionError } from './sessionProbe.js';
import { KitLifecycle } from './state.js';
import { SupersededSweep, tellSuperseded } from './superseded.js';
import { KitTrouble } from './throttle.js';
import {
  ATTACH_CONNECT_RETRIES,
  ATTACH_QUERY_TIMEOUT_MS,
  CLOSE_STEP_MS,
  KIT_POOL_CONNECT_MS,
  KIT_POOL_IDLE_MS,
  KIT_POOL_SLOT_WAIT_MS,
  LIVENESS_START_TIMEOUT_MS,
  REDIS_QUIT_MS,
  WATCH_START_TIMEOUT_MS,
} from './timeouts.js';
import { Watch, type WatchStatus } from './watch.js';

/**
 * The kit as one object: it holds the parts (attach.ts names them) and the one lifecycle they consult
 * (state.ts), and answers for the registry row of this process. Each part is built by a small function
 * below, so the constructor reads as the list of what a kit is made of.
 */
export class Kit implements ExecutorKit, KitCore {
  readonly executorId: string;
  readonly applicationVersion: string;
  readonly incarnation = randomBytes(6).toString('hex');
  readonly lifecycle = new KitLifecycle();
  readonly log: Logger;
  readonly db: Db;
  publisher: Publisher | undefined;
  private publishPath: PublishPath | undefined;
  private readonly facts: KitFacts;
  /** DBOS's queue poll on request (undefined: this DBOS release does not expose it; recoveries ask others). */
  private readonly early: QueuePoller | undefined;
  private readonly pool: pg.Pool;
  private readonly redis: Redis | undefined;
  private readonly ownsRedis: boolean;
  private readonly heartbeat: Heartbeat | undefined;
  private readonly liveness: LivenessLock | undefined;
  private readonly poller: DrainPoller;
  private readonly watcher: Watch;
  private readonly stall: StallWatch | undefined;
  private readonly trouble: KitTrouble;
  private readonly startedAt = new Date();
  private drainPromise: Promise<void> | undefined;
  private resolveDrained!: () => void;
  readonly drained = new Promise<void>((r) => (this.resolveDrained = r));
  private fastPath!: () => void;
  readonly fastPathRequested = new Promise<void>((r) => (this.fastPath = r));
  private readonly onSignal = (sig: NodeJS.Signals) => terminate(this, sig, this.fastPath);
  private sweep: SupersededSweep | undefined;
  /** In-flight count from Postgres, used only when DBOS's internal map is unreachable. */
  private dbInFlight = 0;

  constructor(
    readonly app: DbosApp,
    readonly applicationName: string,
    readonly options: ResolvedKitOptions,
  ) {
    this.executorId = app.executorId;
    this.applicationVersion = app.applicationVersion;
    this.log = (options.logger ?? consoleLogger({ component: 'afterlife-executor' })).child({
      executorId: this.executorId,
      applicationName,
      incarnation: this.incarnation,
    });
    this.pool = kitPool(options.databaseUrl, this.executorId);
    this.db = kitDb(this.pool, options, this.log);
    this.trouble = new KitTrouble(this.log, this.db.afterlifeSchema);
    this.redis = options.redis ?? (options.redisUrl ? createRedis(options.redisUrl, { tlsCa: options.redisTlsCa }) : undefined);
    this.ownsRedis = !options.redis && this.redis !== undefined;
    this.heartbeat = this.redis ? this.heartbeatOn(this.redis) : undefined;
    this.early = queuePoller(this.log);
    this.facts = new KitFacts(this.db, this.identity(), this.log, this.early !== undefined);
    this.liveness = options.liveness !== false ? this.livenessLock() : undefined;
    this.poller = this.drainPoller();
    const lease = this.liveness;
    this.stall = lease ? new StallWatch({ leaseMs: () => lease.leaseMs, onStall: (ms) => this.stalled(ms) }) : undefined;
    this.watcher = new Watch({
      db: this.db,
      applicationName,
      log: this.log,
      trouble: this.trouble,
      active: () => this.lifecycle.connectionsOpen(),
    });
  }

  private heartbeatOn(redis: Redis): Heartbeat {
    const intervalMs = this.options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
    const ttlMs = this.options.heartbeatTtlMs ?? DEFAULT_HEARTBEAT_TTL_MS;
    return new Heartbeat({
      redis,
      ttlMs,
      intervalMs,
      value: () => this.value(intervalMs, ttlMs),
      log: this.log,
      ...(this.options.keyPrefix !== undefined ? { prefix: this.options.keyPrefix } : {}),
    });
  }

  private livenessLock(): LivenessLock {
    const o = this.options;
    return new LivenessLock({
      databaseUrl: o.livenessDatabaseUrl ?? o.databaseUrl,
      applicationName: this.applicationName,
      executorId: this.executorId,
      afterlifeSchema: this.db.afterlifeSchema,
      since: this.startedAt,
      incarnation: this.incarnation,
      ...(o.livenessLeaseMs !== undefined ? { leaseMs: o.livenessLeaseMs } : {}),
      onLease: (ms) => this.facts.lease(ms),
      logger: this.log,
      trouble: this.trouble,
      // The lock is taken only once this incarnation is in the registry (fencing compares with it).
      register: () => this.register(),
      onFenced: (verdict, fence) => this.fence(verdict, fence),
      ...(this.early ? { onRequeued: (n: RequeuedNotice) => this.claimNow(n), requeuedWanted: () => this.early?.canPoll() ?? false } : {}),
      onDrainHint: () => this.poller.pollNow(),
      onNotASession: (err) =>
        this.log.error('liveness lock given up: its connection is not one Postgres session (a transaction-mode pooler)', {
          err,
          event: 'liveness_not_a_session',
        }),
    });
  }

  private drainPoller(): DrainPoller {
    return new DrainPoller({
      db: this.db,
      applicationName: this.applicationName,
      executorId: this.executorId,
      applicationVersion: this.applicationVersion,
      logger: this.log,
      alive: () => this.lifecycle.acceptsWork(),
      needsCount: () => this.app.runningCount() === undefined,
      onCount: (n) => (this.dbInFlight = n),
      onRequest: (req) => void this.drain(req.budgetMs),
      trouble: this.trouble,
      // With the liveness session, a drain request is heard there the moment it is written; the poll is a backstop.
      ...(this.liveness ? { everyMs: DRAIN_BACKSTOP_POLL_MS } : {}),
    });
  }

  get state(): KitState {
    return this.lifecycle.state;
  }

  get watched(): boolean | undefined {
    return this.watcher.current.watched;
  }

  get watch(): WatchStatus {
    return this.watcher.current;
  }

  get draining(): boolean {
    return this.state !== 'alive';
  }

  get livenessHeld(): boolean {
    return this.liveness?.held ?? false;
  }

  get livenessLeaseMs(): number | undefined {
    return this.liveness?.leaseMs;
  }

  get heartbeatsLost(): number {
    return this.heartbeat?.lostCount ?? 0;
  }

  /**
   * Before anything starts: the database answers and holds afterlife's schema. Without it every registry
   * write and drain poll would fail for the life of the process, each one a warning nobody reads. A database
   * that is busy or starting (a connect storm when a fleet starts together) is asked again, a bounded number
   * of times with jittered waits (ATTACH_CONNECT_RETRIES), before that is fatal; a wrong URL or a missing
   * schema fails at once.
   */
  async checkDatabase(): Promise<void> {
    const table = `${this.db.afterlifeSchema}.drain_requests`;
    let found: string | null | undefined;
    try {
      found = await withConnectRetries(() => withTimeout(findTable(this.pool, table), ATTACH_QUERY_TIMEOUT_MS), {
        ...ATTACH_CONNECT_RETRIES,
        onRetry: (err, retry, waitMs) =>
          this.log.notice('the database did not answer the attach in time (busy or starting); asking again', {
            err,
            retry,
            of: ATTACH_CONNECT_RETRIES.attempts - 1,
            waitMs,
            event: 'attach_connect_retry',
          }),
      });
    } catch (err) {
      throw new ConfigError([`databaseUrl: cannot query ${maskUrl(this.options.databaseUrl)}: ${errorMessage(err)}`]);
    }
    if (!found) {
      throw new ConfigError([
        `afterlife's schema "${this.db.afterlifeSchema}" is not in ${maskUrl(this.options.databaseUrl)}: run \`afterlife-plane migrate\` (the recovery plane's CLI: \`npm link\` in its checkout) against this database once (or set AFTERLIFE_SCHEMA / AFTERLIFE_DATABASE_URL to where it is)`,
      ]);
    }
  }

  async start(databaseUrlFrom?: string): Promise<void> {
    if (this.options.handleSignals !== false) {
      // Prepended: functions-framework's listener calls process.exit() synchronously, so ours must run
      // first to hold that exit — also when the app attaches after the framework registered (after listen()).
      process.prependListener('SIGTERM', this.onSignal);
      process.prependListener('SIGINT', this.onSignal);
    }
    await this.startPublisher();
    if (!this.redis)
      this.log.warn('no Redis: no heartbeat; a crash of this executor is found only by the reaper without heartbeat evidence');
    if (!this.publisher) this.log.warn('no publisher: death notices are not sent; leftovers wait for the reaper');
    if (!this.liveness) this.log.warn('liveness lock off: a crash is detected by the heartbeat alone (a TTL later)');

    // With the lock, registration is the liveness connection's first step (retried until it succeeds).
    if (!this.liveness) await guarded(this.log, 'register executor', () => this.register(), undefined, this.trouble);
    // Independent of one another, so a slow database never delays a beat and a hung Redis never delays
    // the lock; each start is bounded.
    await Promise.all([
      this.heartbeat?.beat(),
      this.liveness
        ? withTimeout(this.liveness.start(), LIVENESS_START_TIMEOUT_MS).catch((err: unknown) => this.refuseNotASession(err))
        : undefined,
      this.poller.start(),
      withTimeout(this.watcher.start(), WATCH_START_TIMEOUT_MS).catch(() => undefined),
    ]);
    this.heartbeat?.start();
    this.stall?.start();
    void this.facts.ready();
    // Before the attach line, so that line follows the warning when there is one (bounded, never fatal).
    const idleTransactions = await checkIdleTransactionLimit(this.log);
    this.log.info('executor kit attached', {
      applicationVersion: this.applicationVersion,
      heartbeatIntervalMs: this.heartbeat?.intervalMs,
      liveness: this.liveness ? (this.liveness.held ? 'held' : 'pending') : 'off',
      livenessLeaseMs: this.liveness?.leaseMs,
      watched: this.watched,
      guardedApplications: this.watch.guardedApplications,
      idleInTransactionTimeoutMs: idleTransactions?.ms,
      deathNotices: this.publisher ? (this.publishPath ?? 'custom') : 'off',
      databaseUrlFrom,
    });
  }

  private async startPublisher(): Promise<void> {
    const o = this.options;
    if (o.publisher === 'pubsub') {
      const { publisher, path } = await createKitPublisher({
        ...(o.project ? { project: o.project } : {}),
        ...(o.pubsubEndpoint ? { endpoint: o.pubsubEndpoint } : {}),
        logger: this.log,
      });
      this.publisher = publisher;
      this.publishPath = path;
      void publisher.warm?.(o.topic ?? 'executor-deaths');
    } else if (o.publisher && o.publisher !== 'none') this.publisher = o.publisher;
  }

  /**
   * A liveness start that failed is retried in the background, except one that is not a session: that fails
   * the attach, recorded first (kit_refusals) so that doctor's pooler check can name this executor.
   */
  private async refuseNotASession(err: unknown): Promise<void> {
    if (!(err instanceof NotOneSessionError)) return;
    await this.facts.refused('not-one-session', err.message.replace(/\s+/g, ' '));
    throw err;
  }

  /** Which registry row is this process's. */
  private identity(): { applicationName: string; executorId: string; incarnation: string } {
    return { applicationName: this.applicationName, executorId: this.executorId, incarnation: this.incarnation };
  }

  /** This incarnation into the registry; a newer incarnation already there is left alone (the fence says so). */
  private async register(): Promise<void> {
    const { ours, superseded, supersededSession } = await registerAlive(this.db, {
      applicationName: this.applicationName,
      executorId: this.executorId,
      applicationVersion: this.applicationVersion,
      startedAt: this.startedAt,
      heartbeats: this.redis !== undefined,
      liveness: this.liveness !== undefined,
      incarnation: this.incarnation,
    });
    if (!ours)
      this.log.warn('the registry names a later-started process with this executor ID: this one is superseded', {
        event: 'executor_superseded',
      });
    if (superseded) {
      void tellSuperseded(
        { db: this.db, log: this.log, connectionsOpen: () => this.lifecycle.connectionsOpen() },
        superseded,
        supersededSession,
      );
      this.sweepSuperseded(superseded);
    }
  }

  /** This process took the ID from a live one: what that one claimed after our launch must not be stranded here. */
  private sweepSuperseded(superseded: string): void {
    if (this.sweep || !this.lifecycle.connectionsOpen()) return;
    const liveness = this.liveness;
    if (!liveness) {
      this.log.warn(
        "without the liveness lock this kit cannot tell when the superseded process is gone: whatever it claimed after this one's launch stays PENDING until this executor ID is launched again (restart this process once the other has exited)",
        { superseded, event: 'superseded_work_unknown' },
      );
      return;
    }
    this.sweep = new SupersededSweep({
      db: this.db,
      applicationName: this.applicationName,
      executorId: this.executorId,
      incarnation: this.incarnation,
      superseded,
      log: this.log,
      trouble: this.trouble,
      held: () => liveness.held,
      active: () => this.lifecycle.acceptsWork(),
      runningIds: () => this.app.runningIds(),
    });
    this.sweep.start();
  }

  private value(intervalMs: number, ttlMs: number): HeartbeatValue {
    return {
      executorId: this.executorId,
      applicationName: this.applicationName,
      applicationVersion: this.applicationVersion,
      state: this.state === 'drained' ? 'drained' : this.state === 'alive' ? 'alive' : 'draining',
      startedAt: this.startedAt.toISOString(),
      beatAt: new Date().toISOString(),
      inFlight: this.app.runningCount() ?? this.dbInFlight,
      beatEveryMs: intervalMs,
      ttlMs,
    };
  }

  beat(): Promise<void> {
    return this.heartbeat?.beat() ?? Promise.resolve();
  }

  registry(state: ExecutorState, reason?: string): Promise<void> {
    return guarded(this.log, `registry → ${state}`, () =>
      setState(this.db, {
        applicationName: this.applicationName,
        executorId: this.executorId,
        state,
        applicationVersion: this.applicationVersion,
        incarnation: this.incarnation,
        ...(reason ? { reason, detectedBy: this.executorId } : {}),
      }),
    ).then(() => undefined);
  }

  markDrained(): void {
    this.resolveDrained();
  }

  drain(budgetMs: number): Promise<void> {
    this.drainPromise ??= plannedDrain(this, budgetMs);
    return this.drainPromise;
  }

  /**
   * A recovery asks this executor to claim the work it re-enqueued now, not at DBOS's next poll: only while it
   * takes new work and runs the rows' version, which is all DBOS's claim would take anyway.
   */
  private claimNow(n: RequeuedNotice): void {
    if (!this.lifecycle.acceptsWork()) return;
    if (n.applicationVersion !== null && n.applicationVersion !== undefined && n.applicationVersion !== this.applicationVersion) return;
    const polled = this.early?.poll(n.queues) ?? [];
    this.log.debug('claiming re-enqueued work now', { queues: polled, asked: n.queues, event: 'requeued_poll' });
  }

  /** Declared dead by someone else while still running: exit now (unless this kit is handing over itself). */
  private fence(verdict: FenceVerdict, fence?: Fence): void {
    if (!this.lifecycle.fence()) return;
    fenceNow(this.log, { verdict, ...fence }, this.options.onFenced, { executorId: this.executorId, incarnation: this.incarnation });
  }

  /** Stood still past the lease (stall.ts): exit as a fenced kit does, without asking first. */
  private stalled(stoppedMs: number): void {
    if (!this.lifecycle.fence()) return;
    stallExitNow(this.log, stoppedMs, this.liveness?.leaseMs ?? 0, this.options.onFenced, {
      executorId: this.executorId,
      incarnation: this.incarnation,
    });
  }

  async close(left: Left = (c) => c): Promise<void> {
    if (!this.lifecycle.close()) return;
    this.poller.stop();
    this.sweep?.stop();
    this.watcher.stop();
    this.stall?.stop();
    process.off('SIGTERM', this.onSignal);
    process.off('SIGINT', this.onSignal);
    const redis = this.redis;
    // The heartbeat's DEL is the "clean exit" signal; the liveness session ends with the process anyway.
    await Promise.all([
      this.heartbeat?.stop(left(CLOSE_STEP_MS)),
      this.liveness ? withTimeout(this.liveness.close(), left(CLOSE_STEP_MS)).catch(() => undefined) : undefined,
    ]);
    // Polite closes, bounded: at exit the sockets are dropped anyway, which Postgres and Redis tolerate.
    await Promise.allSettled([
      this.publisher ? withTimeout(this.publisher.close(), left(CLOSE_STEP_MS)) : undefined,
      this.ownsRedis && redis ? withTimeout(redis.quit(), left(REDIS_QUIT_MS)).catch(() => redis.disconnect()) : undefined,
      withTimeout(this.pool.end(), left(CLOSE_STEP_MS)),
    ]);
  }
}

/** Small and separate from DBOS's pool: registry rows, drain polls and one count at shutdown. */
function kitPool(databaseUrl: string, executorId: string): pg.Pool {
  return new pg.Pool({
    connectionString: databaseUrl,
    max: 2,
    idleTimeoutMillis: KIT_POOL_IDLE_MS,
    connectionTimeoutMillis: KIT_POOL_CONNECT_MS,
    application_name: `afterlife_kit_${executorId}`.slice(0, 63),
  });
}

function kitDb(pool: pg.Pool, o: ResolvedKitOptions, log: Logger): Db {
  return createDb(pool, 2, {
    dbosSchema: o.dbosSchema ?? 'dbos',
    afterlifeSchema: o.afterlifeSchema ?? 'afterlife',
    logger: log,
    budgetWaitMs: KIT_POOL_SLOT_WAIT_MS,
  });
}
