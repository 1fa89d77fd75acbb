/**
 * The executor kit: what a launched DBOS app attaches so that crashes are seen in about a second, shutdowns
 * and deploys hand their work over at once, and a zombie stops itself (docs/design.md#failure-1-executor-death-leaves-orphans and
 * #failure-2-the-shutdown-race). This
 * file attaches; the parts are each in their own module:
 *
 *   kit.ts            the kit object: builds the parts below and answers for this process's registry row
 *   state.ts          the kit's one lifecycle (alive → draining/exiting → … → closed) and the questions it answers
 *   timeouts.ts       every bound the kit puts on its own steps
 *   heartbeat.ts      the Redis key, a beat every 250 ms (state + inFlight), kept until the end of a drain
 *   liveness.ts       the Postgres liveness lock on a connection of its own, and the fence question
 *   fence.ts          a kit declared dead exits at once
 *   drainRequests.ts  drain requests for its ID or version, polled every second and once at attach
 *   terminate.ts      SIGTERM/SIGINT → drain inside Cloud Run's 10 s → hand-over → exit
 *   drain.ts          a planned drain → hand-over → `drained`, then idle (or exit)
 *   watch.ts          whether a plane guards this application; a WARNING once a minute while none does
 *   sessionProbe.ts   the liveness connection is one server session, not a transaction-mode pool
 *   handOver.ts       the death notice for whatever is still PENDING
 *   superseded.ts     after superseding a live process with this ID, re-enqueue what it left PENDING here
 *
 * Nothing here is allowed to crash the app: Redis, Postgres and Pub/Sub failures are logged and bounded.
 * @module
 */
import { AfterlifeError, ConfigError } from '../errors.js';
import { KEY_PREFIX_RE } from '../contract/heartbeat.js';
import { holdExit } from '../lifecycle/orderedShutdown.js';
import { consoleLogger } from '../log.js';
import { dbosApp } from './dbosInternals.js';
import { executorOptionsFromEnv } from './env.js';
import { Kit } from './kit.js';
import type { ExecutorKitOptions, KitState } from './options.js';
import { resolveKitOptions } from './resolve.js';
import type { WatchStatus } from './watch.js';

/** The executor ID is missing or DBOS's shared default `local`: every process would claim the others' work. */
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
