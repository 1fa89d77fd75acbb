/**
 * The liveness lease: how long the server lets the kit's liveness session stay silent before it ends the
 * session — and so frees the lock — by itself (`idle_session_timeout`). Timed by Postgres, so it holds
 * through anything between the process and the server (Cloud SQL's proxy, the connector, the Auth Proxy,
 * PgBouncer in session mode, a NAT), where TCP keepalives only watch the nearest leg.
 *
 * The default is the measured trade (docs/liveness.md, bench/vanish.ts): a lost host's work must run
 * elsewhere within 12 s p95 (lease + ~1 s of reaper ticks + a queue poll), and a freeze or a blocked event
 * loop of 5 s must never read as a death. The kit renews the lease once a second (LIVENESS_RENEW_EVERY_MS),
 * so a 5 s freeze is up to ~6 s of silence; 8 s leaves 2 s for GC pauses and a loaded host.
 */
export const DEFAULT_LIVENESS_LEASE_MS = 8_000;

/**
 * How often the kit speaks on its liveness session, which is what renews the lease: any message resets the
 * server's `idle_session_timeout`, so a renewal that is not a fence question is an empty query (no parse, no
 * plan, no snapshot, nothing in pg_stat_statements: one round trip). Kept at a second so that a 5 s freeze is
 * at most ~6 s of silence against the 8 s lease, the margin the lease was chosen for.
 */
export const LIVENESS_RENEW_EVERY_MS = 1_000;

/**
 * How often the kit asks its fence question (packages/executor/src/contract/fenceCheck.ts) when nothing hinted
 * it: a backstop. The question's answer changes only when the plane writes the registry or the recovery
 * audit, and the writes that fence a live process announce themselves on the fence channel the kit listens
 * on (a declaration of death, a registration superseding a live incarnation); the kit also asks at every
 * (re)connect, before it takes the lock, so a process whose session the lease ended always asks before it
 * holds anything again. What is left to the backstop is a NOTIFY that was never delivered (the session was
 * being replaced) and a recovery that moved rows of an executor it left registered alive: those are seen
 * within this. Every LIVENESS_FENCE_EVERY_MS / LIVENESS_RENEW_EVERY_MS-th renewal is the fence question.
 * Python kits follow the same cadence.
 */
export const LIVENESS_FENCE_EVERY_MS = 4_000;
/**
 * Below this, one late renewal (1 s cadence) plus a GC pause or a busy host ends a live session: a lease
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
