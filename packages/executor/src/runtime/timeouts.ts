/**
 * Every bound the kit puts on its own steps, in one place. Nothing the kit does may hang the app or outlive
 * a platform's grace, so each wait on Postgres, Redis or Pub/Sub is capped by one of these; cadences (the
 * beat, the drain poll, the watch) live with the module that keeps them.
 * @module
 */

/** Cloud Run's SIGTERM grace: SIGKILL follows this long after the signal. */
export const CLOUD_RUN_GRACE_MS = 10_000;
/** Of the grace, kept back from the drain budget for what follows it (the exit itself, the platform's slack). */
export const DEFAULT_SHUTDOWN_MARGIN_MS = 2_000;
/** Of the drain budget, kept for the PENDING count, the death notice, the heartbeat delete and the exit. */
export const DEFAULT_HANDOVER_RESERVE_MS = 1_500;
/** Whatever happens, the process exits this long before the grace ends (SIGKILL would lose the exit code). */
export const HARD_EXIT_BEFORE_GRACE_MS = 300;
/** One step of a hand-over or a shutdown (the PENDING count, a registry write, the close). */
export const STEP_TIMEOUT_MS = 1_000;
/** The death notice's publish, unless `publishTimeoutMs` says otherwise. */
export const DEFAULT_PUBLISH_TIMEOUT_MS = 1_000;
/**
 * A drain whose work outlived its budget exits right after its notice: the registry's `drained` may take
 * this long, no more, since recovery may already be running that work elsewhere.
 */
export const DRAIN_EXIT_REGISTRY_MS = 500;

/** One closing step (the heartbeat's DEL, the liveness unlock, the publisher, the kit's pool). */
export const CLOSE_STEP_MS = 500;
/** Redis's polite QUIT at close; the socket is dropped after it, which Redis tolerates. */
export const REDIS_QUIT_MS = 300;

/** The kit's own pool: a connection idle this long is closed (the kit's statements are seconds apart). */
export const KIT_POOL_IDLE_MS = 10_000;
/** The kit's own pool: a connect that takes longer fails (and is retried by the chore that asked). */
export const KIT_POOL_CONNECT_MS = 2_000;
/** How long a statement waits for one of the kit pool's two slots before it fails. */
export const KIT_POOL_SLOT_WAIT_MS = 2_000;

/** Each try of the attach's first question to the database (see ATTACH_CONNECT_RETRIES). */
export const ATTACH_QUERY_TIMEOUT_MS = 5_000;
/**
 * The attach's first question to the database, tried up to 6 times with jittered waits (0.25–8 s, 16 s at
 * most in all) when the server is busy or starting: a fleet that starts together is one connect storm, and a
 * kit that gave up on its first timeout would exit for a database that answers a few seconds later. At most
 * ~46 s before a database that never answers is fatal (6 tries of 5 s and the waits), within the minute a
 * fleet's start is given.
 */
export const ATTACH_CONNECT_RETRIES = { attempts: 6, minMs: 500, maxMs: 8_000 } as const;
/** The liveness lock's first take at attach; a slower one goes on in the background. */
export const LIVENESS_START_TIMEOUT_MS = 3_000;
/** The watch's first check at attach; until it answers, `watched` is undefined. */
export const WATCH_START_TIMEOUT_MS = 2_000;

/** How long a superseded predecessor's session may take to end before it is reported as a live process. */
export const SUPERSEDED_SETTLE_MS = 1_000;
/** How often that session is looked for meanwhile. */
export const SUPERSEDED_LOOK_EVERY_MS = 50;
