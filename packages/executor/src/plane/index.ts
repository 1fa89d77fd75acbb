/**
 * What the plane (shared/, functions/, cli/) may use of the kit's package, and the one way it reaches it: the
 * contract both sides read, the errors and logging, the pool wrapper and afterlife's registry statements, DBOS's
 * SQL the kit and the plane share, the lock client, the publisher, repair's primitives, fault points (and, in
 * situations.ts beside it, the fork planner repair's situations use). Never the
 * kit's runtime (src/runtime/: attach, liveness, heartbeat, drain): dependency-cruiser's
 * `plane-imports-kit-internals` rule keeps every plane import on this module, so a refactor of the kit's
 * insides changes no plane file. Not part of the published package (tshy's exports do not name it).
 * @module
 */

export * from '../cloudLogging.js';
export * from '../contract/deathNotice.js';
export * from '../contract/guard.js';
export * from '../contract/heartbeat.js';
export * from '../contract/redisKeys.js';
export * from '../contract/heartbeatBounds.js';
export * from '../contract/identifier.js';
export * from '../contract/lease.js';
export * from '../contract/livenessKey.js';
export * from '../contract/parse.js';
export * from '../contract/redisTls.js';
export * from '../contract/requeued.js';
export * from '../contract/sessionName.js';
export * from '../contract/settings.js';
export * from '../db/budget.js';
export * from '../db/pool.js';
export * from '../db/queries/drainRequests.js';
export * from '../db/queries/executors.js';
export * from '../db/queries/liveness.js';
export * from '../db/target.js';
export * from '../dbos/divergence.js';
export * from '../dbos/pendingByVersion.js';
export * from '../dbos/sql.js';
export * from '../errors.js';
export * from '../events/publisher.js';
export * from '../lifecycle/orderedShutdown.js';
export * from '../lock/redis.js';
export * from '../log.js';
export * from '../logThrottle.js';
export * from '../repair/primitives/fork.js';
export * from '../repair/primitives/lineage.js';
export * from '../testing/faults.js';
export * from '../text.js';
export * from '../version.js';
