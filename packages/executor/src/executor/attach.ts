import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { registerAlive, sessionPresent, setState, type ExecutorState } from '../db/queries/executors.js';
import { createDb, type Db } from '../db/pool.js';
import { findTable } from '../db/queries/schemaCheck.js';
import { AfterlifeError, ConfigError, errorMessage } from '../errors.js';
import type { Publisher } from '../events/publish.js';
import { type HeartbeatValue, KEY_PREFIX_RE } from '../contract/heartbeat.js';
import type { Fence, FenceVerdict } from '../contract/fenceCheck.js';
import type { RequeuedNotice } from '../contract/requeued.js';
import { holdExit, withTimeout } from '../lifecycle/shutdown.js';
import { createRedis } from '../lock/redis.js';
import { consoleLogger, type Logger } from '../log.js';
import type { KitCore, Left } from './core.js';
import { dbosApp, type DbosApp } from './dbosInternals.js';
import { plannedDrain } from './drain.js';
import { withConnectRetries } from './connectRetry.js';
import { DRAIN_BACKSTOP_POLL_MS, DrainPoller } from './drainRequests.js';
import { fenceNow } from './fence.js';
import { guarded } from './guarded.js';
import { checkIdleTransactionLimit } from './idleTransactions.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TTL_MS, Heartbeat } from './heartbeat.js';
import { KitFacts } from './kitFacts.js';
import { LivenessLock } from './liveness.js';
import { type QueuePoller, queuePoller } from './pollNow.js';
import { maskUrl } from './maskUrl.js';
import { createKitPublisher, type PublishPath } from './publishPath.js';
import { executorOptionsFromEnv } from './env.js';
import type { ExecutorKitOptions, KitState } from './options.js';
import { type ResolvedKitOptions, resolveKitOptions } from './resolve.js';
import { terminate } from './shutdown.js';
import { NotOneSessionError } from './sessionProbe.js';
import { SupersededSweep } from './superseded.js';
import { KitTrouble } from './throttle.js';
import { Watch, type WatchStatus } from './watch.js';

/**
 * The executor kit: what a launched DBOS app attaches so that crashes are seen in about a second, shutdowns
 * and deploys hand their work over at once, and a zombie stops itself (docs/design.md#failure-1-executor-death-leaves-orphans and
 * #failure-2-the-shutdown-race). This
 * file only wires the parts, each in its own module:
 *
 *   heartbeat.ts      the Redis key, a beat every 250 ms (state + inFlight), kept until the end of a drain
 *   liveness.ts       the Postgres liveness lock on a connection of its own, and the fence question
 *   fence.ts          a kit declared dead exits at once
 *   drainRequests.ts  drain requests for its ID or version, polled every second and once at attach
 *   shutdown.ts       SIGTERM/SIGINT → drain inside Cloud Run's 10 s → hand-over → exit
 *   drain.ts          a planned drain → hand-over → `drained`, then idle (or exit)
 *   watch.ts          whether a plane guards this application; a WARNING once a minute while none does
 *   sessionProbe.ts   the liveness connection is one server session, not a transaction-mode pool
 *   handOver.ts       the death notice for whatever is still PENDING
 *   superseded.ts     after superseding a live process with this ID, re-enqueue what it left PENDING here
 *
 * Nothing here is allowed to crash the app: Redis, Postgres and Pub/Sub failures are logged and bounded.
 */
export class ExecutorIdError extends AfterlifeError {
  constructor(message: string) {
    super(message, 'executor_id', 'permanent');
  }
}

export interface ExecutorKit {
  readonly executorId: string;
  readonly applicationName: string;
  readonly applicationVersion: string;
  /** This process start of the executor ID (random): the registry, the death notices and fencing name it. */
  readonly incarnation: string;
  /** The liveness lease the server times, in ms (undefined with `liveness: false`). */
  readonly livenessLeaseMs: number | undefined;
  readonly state: KitState;
  /** True from the first moment of a drain: the app should refuse new work (answer 503). */
  readonly draining: boolean;
  /** Resolves when a drain (planned or signalled) has finished waiting for in-flight work. */
  readonly drained: Promise<void>;
  /** Whether the liveness lock is held right now (false with `liveness: false`). */
  readonly livenessHeld: boolean;
  /**
   * Whether a plane in this database guards this kit's application (its reaper ticked for it lately): true,
   * false, or undefined until the database first answered (a few seconds after attach at most). While
   * false the kit logs a WARNING (`kit_unwatched`) once a minute naming the fix.
   */
  readonly watched: boolean | undefined;
  /** The same with the applications the planes here guard, and when it was last checked. */
  readonly watch: WatchStatus;
  /** Times the heartbeat went unwritten for a whole TTL since attach (each also logged as `heartbeat_lost`). */
  readonly heartbeatsLost: number;
  /** Drain now, as a drain request would. */
  drain(budgetMs: number): Promise<void>;
  /** Stops beating, releases the liveness lock, closes the kit's connections; DBOS is left alone. */
  close(): Promise<void>;
}

/** The exit code of a fatal failed attach (EX_CONFIG): the platform restarts the instance, and says why. */
export const ATTACH_FAILED_EXIT_CODE = 78;
/** How long a superseded predecessor's session may take to end before it is reported as a live process. */
const SUPERSEDED_SETTLE_MS = 1_000;
/**
 * The attach's first question to the database, tried up to 6 times with jittered waits (0.25–8 s, 16 s at
 * most in all) when the server is busy or starting: a fleet that starts together is one connect storm, and a
 * kit that gave up on its first timeout would exit for a database that answers a few seconds later. At most
 * ~46 s before a database that never answers is fatal (6 tries of 5 s and the waits), within the minute a
 * fleet's start is given.
 */
const ATTACH_CONNECT_RETRIES = { attempts: 6, minMs: 500, maxMs: 8_000 } as const;

/** Small and separate from DBOS's pool: registry rows, drain polls and one count at shutdown. */
function kitPool(databaseUrl: string, executorId: string): pg.Pool {
  return new pg.Pool({
    connectionString: databaseUrl,
    max: 2,
    idleTimeoutMillis: 10_000,
    connectionTimeoutMillis: 2_000,
    application_name: `afterlife_kit_${executorId}`.slice(0, 63),
  });
}

/**
 * Attaches the kit to the launched DBOS app. With no options it reads what DBOS already knows (system
 * database, schema, application name, executor ID, version) and the environment (`executorOptionsFromEnv`);
 * explicit options win over both. A failed attach is fatal by default (see `fatal`).
 */
export async function attachExecutor(options: ExecutorKitOptions = {}): Promise<ExecutorKit> {
  // Read raw here, before anything can fail: a malformed AFTERLIFE_ATTACH_FATAL is itself a failed attach (fatal).
  const fatal = options.fatal ?? (options.env ?? process.env).AFTERLIFE_ATTACH_FATAL !== 'false';
  try {
    return await attach(options, fatal);
  } catch (err) {
    if (!fatal) throw err;
    const log = options.logger ?? consoleLogger({ component: 'afterlife-executor' });
    log.error(
      'executor kit NOT attached: exiting, so the app never runs on without crash recovery unnoticed (fatal: false to handle it instead)',
      {
        err,
        exitCode: ATTACH_FAILED_EXIT_CODE,
        event: 'kit_attach_failed',
      },
    );
    holdExit()(ATTACH_FAILED_EXIT_CODE);
    // Only reached where process.exit is stubbed (tests): the attach still failed.
    throw err;
  }
}

async function attach(options: ExecutorKitOptions, fatal: boolean): Promise<ExecutorKit> {
  // Checked as the functions check REDIS_KEY_PREFIX: a kit and the plane must agree on where heartbeats live.
  if (options.keyPrefix !== undefined && !KEY_PREFIX_RE.test(options.keyPrefix)) {
    throw new ConfigError([
      `keyPrefix: must be 1-64 letters, digits, "_", "." or "-" (it is part of every Redis key); got ${JSON.stringify(options.keyPrefix)}`,
    ]);
  }
  const app = await dbosApp();
  if (
    !app.executorId ||
    (app.executorId === 'local' &&
      !(options.allowLocalExecutorId ?? executorOptionsFromEnv(options.env ?? process.env).allowLocalExecutorId))
  ) {
    throw new ExecutorIdError(
      `executor ID "${app.executorId}" is DBOS's shared default: set DBOSConfig.executorID or DBOS__VMID to a unique ` +
        `value per process (e.g. cloudRunExecutorId() on Cloud Run), or pass allowLocalExecutorId for a single-process dev setup`,
    );
  }
  const { options: resolved, databaseUrlFrom } = resolveKitOptions(app, options, options.env ?? process.env);
  const kit = new Kit(app, resolved.applicationName, resolved);
  try {
    // Non-fatal kits start anyway: database trouble is then logged once a minute and heals by itself (throttle.ts).
    if (fatal) await kit.checkDatabase();
    await kit.start(databaseUrlFrom);
  } catch (err) {
    await kit.close().catch(() => undefined);
    throw err;
  }
  return kit;
}

class Kit implements ExecutorKit, KitCore {
  readonly executorId: string;
  readonly applicationVersion: string;
  readonly incarnation = randomBytes(6).toString('hex');
  private readonly facts: KitFacts;
  /** DBOS's queue poll on request (undefined: this DBOS release does not expose it; recoveries ask others). */
  private readonly early: QueuePoller | undefined;
  state: KitState = 'alive';
  terminating = false;
  handingOver = false;
  readonly log: Logger;
  readonly db: Db;
  publisher: Publisher | undefined;
  private publishPath: PublishPath | undefined;
  private readonly pool: pg.Pool;
  private readonly redis: Redis | undefined;
  private readonly ownsRedis: boolean;
  private readonly heartbeat: Heartbeat | undefined;
  private readonly liveness: LivenessLock | undefined;
  private readonly poller: DrainPoller;
  private readonly watcher: Watch;
  private readonly trouble: KitTrouble;
  private readonly startedAt = new Date();
  private drainPromise: Promise<void> | undefined;
  private resolveDrained!: () => void;
  readonly drained = new Promise<void>((r) => (this.resolveDrained = r));
  private fastPath!: () => void;
  readonly fastPathRequested = new Promise<void>((r) => (this.fastPath = r));
  private readonly onSignal = (sig: NodeJS.Signals) => terminate(this, sig, this.fastPath);
  private closed = false;
  private fenced = false;
  private sweep: SupersededSweep | undefined;
  /** In-flight count from Postgres, used only when DBOS's internal map is unreachable. */
  private dbInFlight = 0;

  constructor(
    readonly app: DbosApp,
    readonly applicationName: string,
    readonly options: ResolvedKitOptions,
  ) {
    const o = options;
    this.executorId = app.executorId;
    this.applicationVersion = app.applicationVersion;
    this.log = (o.logger ?? consoleLogger({ component: 'afterlife-executor' })).child({
      executorId: this.executorId,
      applicationName,
      incarnation: this.incarnation,
    });
    this.pool = kitPool(o.databaseUrl, this.executorId);
    this.db = createDb(this.pool, 2, {
      dbosSchema: o.dbosSchema ?? 'dbos',
      afterlifeSchema: o.afterlifeSchema ?? 'afterlife',
      logger: this.log,
      budgetWaitMs: 2_000,
    });
    this.trouble = new KitTrouble(this.log, this.db.afterlifeSchema);
    this.redis = o.redis ?? (o.redisUrl ? createRedis(o.redisUrl, { tlsCa: o.redisTlsCa }) : undefined);
    this.ownsRedis = !o.redis && this.redis !== undefined;
    const intervalMs = o.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
    const ttlMs = o.heartbeatTtlMs ?? DEFAULT_HEARTBEAT_TTL_MS;
    if (this.redis) {
      this.heartbeat = new Heartbeat(this.redis, ttlMs, intervalMs, () => this.value(intervalMs, ttlMs), this.log, o.keyPrefix);
    }
    this.early = queuePoller(this.log);
    this.facts = new KitFacts(this.db, this.identity(), this.log, this.early !== undefined);
    if (o.liveness !== false) {
      this.liveness = new LivenessLock({
        databaseUrl: o.livenessDatabaseUrl ?? o.databaseUrl,
        applicationName,
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
        ...(this.early
          ? { onRequeued: (n: RequeuedNotice) => this.claimNow(n), requeuedWanted: () => this.early?.canPoll() ?? false }
          : {}),
        onDrainHint: () => this.poller.pollNow(),
        onNotASession: (err) =>
          this.log.error('liveness lock given up: its connection is not one Postgres session (a transaction-mode pooler)', {
            err,
            event: 'liveness_not_a_session',
          }),
      });
    }
    this.poller = new DrainPoller({
      db: this.db,
      applicationName,
      executorId: this.executorId,
      applicationVersion: this.applicationVersion,
      logger: this.log,
      alive: () => this.state === 'alive' && !this.closed,
      needsCount: () => this.app.runningCount() === undefined,
      onCount: (n) => (this.dbInFlight = n),
      onRequest: (req) => void this.drain(req.budgetMs),
      trouble: this.trouble,
      // With the liveness session, a drain request is heard there the moment it is written; the poll is a backstop.
      ...(this.liveness ? { everyMs: DRAIN_BACKSTOP_POLL_MS } : {}),
    });
    this.watcher = new Watch({
      db: this.db,
      applicationName,
      log: this.log,
      trouble: this.trouble,
      active: () => !this.closed,
    });
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
      found = await withConnectRetries(() => withTimeout(findTable(this.pool, table), 5_000), {
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
    const o = this.options;
    if (o.handleSignals !== false) {
      // Prepended: functions-framework's listener calls process.exit() synchronously, so ours must run
      // first to hold that exit — also when the app attaches after the framework registered (after listen()).
      process.prependListener('SIGTERM', this.onSignal);
      process.prependListener('SIGINT', this.onSignal);
    }
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
      this.liveness ? withTimeout(this.liveness.start(), 3_000).catch((err: unknown) => this.refuseNotASession(err)) : undefined,
      this.poller.start(),
      withTimeout(this.watcher.start(), 2_000).catch(() => undefined),
    ]);
    this.heartbeat?.start();
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
      void this.tellSuperseded(superseded, supersededSession);
      this.sweepSuperseded(superseded);
    }
  }

  /**
   * Says what taking the ID over meant. The registry said the previous incarnation was alive, but a process
   * restarted a moment after a SIGKILL finds its predecessor undeclared, its session still being torn down:
   * that one is no live process. So the previous liveness session is watched for a moment: gone within
   * SUPERSEDED_SETTLE_MS is a NOTICE; still there after it, a WARNING (a second live process with this ID).
   */
  private async tellSuperseded(superseded: string, session: { pid: number; backendStart: string } | null): Promise<void> {
    const t0 = Date.now();
    let present: boolean | undefined = session === null ? undefined : true;
    try {
      while (session !== null && present === true && Date.now() - t0 < SUPERSEDED_SETTLE_MS && !this.closed) {
        await new Promise((r) => setTimeout(r, 50));
        present = await sessionPresent(this.db, session);
      }
    } catch {
      present = undefined;
    }
    if (present === false) {
      this.log.notice(
        `took this executor ID over from its previous process, whose liveness session ended ${Date.now() - t0} ms after this one registered (it had stopped, or stopped on seeing this one, before the plane declared it); its leftover PENDING work, if any, is re-enqueued`,
        { superseded, event: 'executor_superseded_other' },
      );
      return;
    }
    this.log.warn(
      present === true
        ? `another process with this executor ID is still live ${SUPERSEDED_SETTLE_MS} ms after this one registered (a duplicated executor ID, or an overlapping restart): it is superseded and its kit exits; its leftover PENDING work is re-enqueued once its lease is gone`
        : 'the registry said another process with this executor ID was alive, and its session cannot be seen from here: it is superseded and its kit exits if it is still running; its leftover PENDING work is re-enqueued once its lease is gone',
      { superseded, event: 'executor_superseded_other' },
    );
  }

  /** This process took the ID from a live one: what that one claimed after our launch must not be stranded here. */
  private sweepSuperseded(superseded: string): void {
    if (this.sweep || this.closed) return;
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
      active: () => this.state === 'alive' && !this.closed && !this.fenced,
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
   * takes new work (alive, not fenced) and runs the rows' version, which is all DBOS's claim would take anyway.
   */
  private claimNow(n: RequeuedNotice): void {
    if (this.state !== 'alive' || this.fenced || this.closed || this.handingOver) return;
    if (n.applicationVersion !== null && n.applicationVersion !== undefined && n.applicationVersion !== this.applicationVersion) return;
    const polled = this.early?.poll(n.queues) ?? [];
    this.log.debug('claiming re-enqueued work now', { queues: polled, asked: n.queues, event: 'requeued_poll' });
  }

  /** Declared dead by someone else while still running: exit now (unless this kit is handing over itself). */
  private fence(verdict: FenceVerdict, fence?: Fence): void {
    if (this.fenced || this.handingOver || this.closed) return;
    this.fenced = true;
    fenceNow(this.log, { verdict, ...fence }, this.options.onFenced, { executorId: this.executorId, incarnation: this.incarnation });
  }

  async close(left: Left = (c) => c): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.poller.stop();
    this.sweep?.stop();
    this.watcher.stop();
    process.off('SIGTERM', this.onSignal);
    process.off('SIGINT', this.onSignal);
    const redis = this.redis;
    // The heartbeat's DEL is the "clean exit" signal; the liveness session ends with the process anyway.
    await Promise.all([
      this.heartbeat?.stop(left(500)),
      this.liveness ? withTimeout(this.liveness.close(), left(500)).catch(() => undefined) : undefined,
    ]);
    // Polite closes, bounded: at exit the sockets are dropped anyway, which Postgres and Redis tolerate.
    await Promise.allSettled([
      this.publisher ? withTimeout(this.publisher.close(), left(500)) : undefined,
      this.ownsRedis && redis ? withTimeout(redis.quit(), left(300)).catch(() => redis.disconnect()) : undefined,
      withTimeout(this.pool.end(), left(500)),
    ]);
  }
}
