/**
 * What "a plane guards application X in this database" means, to the kit (`kit.watched`) and the plane alike
 *: the reaper of each plane keeps a lease row named `reaper:<X>` in afterlife's `leases` table and
 * records there the last tick it completed (`last_tick_at`, database clock). A row stays after its plane
 * stops; only its age says whether anyone still guards X.
 * @module
 */

export const REAPER_LEASE_PREFIX = 'reaper:';

/**
 * A plane guards an application while its reaper's lease recorded a tick this recently. Cloud Scheduler
 * starts an invocation every minute (each runs up to FUNCTION_TIMEOUT_S, 60 s by default), so two minutes
 * cover one missed invocation without calling a live plane gone.
 */
export const GUARD_TICK_WITHIN_MS = 120_000;
