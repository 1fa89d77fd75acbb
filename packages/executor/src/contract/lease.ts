/**
 * The liveness lease: how long the server lets the kit's liveness session stay silent before it ends the
 * session — and so frees the lock — by itself (`idle_session_timeout`). Timed by Postgres, so it holds
 * through anything between the process and the server (Cloud SQL's proxy, the connector, the Auth Proxy,
 * PgBouncer in session mode, a NAT), where TCP keepalives only watch the nearest leg.
 *
 * The default is the measured trade (docs/liveness.md, bench/vanish.ts): a lost host's work must run
 * elsewhere within 12 s p95 (lease + ~1 s of reaper ticks + a queue poll), and a freeze or a blocked event
 * loop of 5 s must never read as a death. The kit's fence query renews the lease once a second, so a 5 s
 * freeze is up to ~6 s of silence; 8 s leaves 2 s for GC pauses and a loaded host.
 */
export const DEFAULT_LIVENESS_LEASE_MS = 8_000;
/**
 * Below this, one late fence query (1 s cadence) plus a GC pause or a busy host ends a live session: a lease
 * the kit cannot keep is a false death waiting to happen, so it is refused, not clamped.
 */
export const MIN_LIVENESS_LEASE_MS = 3_000;
/** Longer than this and a lost host strands its work for minutes: that is the old lock, not a lease. */
export const MAX_LIVENESS_LEASE_MS = 300_000;

/**
 * The lease a session ends up with when the URL (`options=-c idle_session_timeout=…`), the role or the
 * database already set one: a shorter inherited value the kit can keep is the operator's stricter choice and
 * is kept; a longer one, or none (0), is replaced by the configured lease; one too short to keep is replaced
 * too, loudly. Never silently: the caller logs whenever the inherited value was not 0 and differed.
 */
export function effectiveLease(
  configuredMs: number,
  inheritedMs: number,
): { leaseMs: number; inherited: 'none' | 'kept' | 'longer' | 'unsafe' } {
  if (!Number.isFinite(inheritedMs) || inheritedMs <= 0) return { leaseMs: configuredMs, inherited: 'none' };
  if (inheritedMs >= configuredMs) return { leaseMs: configuredMs, inherited: inheritedMs === configuredMs ? 'none' : 'longer' };
  if (inheritedMs < MIN_LIVENESS_LEASE_MS) return { leaseMs: configuredMs, inherited: 'unsafe' };
  return { leaseMs: inheritedMs, inherited: 'kept' };
}
