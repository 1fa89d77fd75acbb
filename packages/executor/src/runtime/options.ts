import type { Redis } from 'ioredis';
import type { Publisher } from '../events/publish.js';
import type { Logger } from '../log.js';

export type KitState = 'alive' | 'draining' | 'drained' | 'exiting';

export interface ExecutorKitOptions {
  /**
   * Where afterlife's schema and DBOS's system tables live: the DBOS system database. Default:
   * AFTERLIFE_DATABASE_URL, else the URL DBOS launched with, else DBOS_SYSTEM_DATABASE_URL.
   */
  databaseUrl?: string;
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
  /** Time between beats (default 250 ms): a crashed executor's heartbeat reads stale after two of them. */
  heartbeatIntervalMs?: number;
  /**
   * Hold the liveness lock (default true): a session advisory lock on a connection of the kit's own, free the
   * moment the process dies. Turn it off only when `databaseUrl` goes through a pooler in transaction mode
   * (PgBouncer), where session locks do not hold; or give `livenessDatabaseUrl` a direct route instead.
   */
  liveness?: boolean;
  /**
   * The liveness lease in ms (default 8000): the server ends the liveness session — freeing the lock — once
   * the process has sent nothing for this long, so a lost host or a freeze longer than this reads as a death
   * (the process fences itself when it wakes). 3000–300000; anything else is a ConfigError (docs/liveness.md).
   */
  livenessLeaseMs?: number;
  /** Where the liveness connection goes, if not `databaseUrl` (a direct route past a pooler). */
  livenessDatabaseUrl?: string;
  /**
   * `pubsub`: Pub/Sub, by the lightest path available (publishPath.ts: the emulator's or the service's REST
   * API with the metadata server's token, or `@google-cloud/pubsub` when the app has it); `none`: no death
   * notices (the reaper finds leftovers).
   */
  publisher?: Publisher | 'pubsub' | 'none';
  project?: string;
  /** Pub/Sub REST endpoint for the metadata-token path (a regional or private endpoint); default the global one. */
  pubsubEndpoint?: string;
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
  /**
   * A failed attach (bad configuration, afterlife's schema missing, the database unreachable, DBOS not
   * launched) logs one ERROR and exits the process with ATTACH_FAILED_EXIT_CODE (default true), so an app
   * never runs on without the kit unnoticed. `false` (or AFTERLIFE_ATTACH_FATAL=false): a configuration error
   * rejects and the app decides; database trouble (unreachable, schema missing) does not stop the attach —
   * the kit starts unprotected, says so at ERROR once a minute, and recovers by itself once it is fixed.
   */
  fatal?: boolean;
  /** Where options are read from besides these (default process.env); explicit options win. */
  env?: Record<string, string | undefined>;
  /**
   * What a fenced kit does (declared dead by someone else, or its workflows moved): by default it exits
   * with FENCED_EXIT_CODE at once. Tests and embedders may take the exit themselves.
   */
  onFenced?: (exitCode: number) => void;
}
