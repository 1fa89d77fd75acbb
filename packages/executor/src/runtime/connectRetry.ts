/**
 * Bounded, jittered retries for the kit's connects. A fleet starts together (a deploy, a scale-out, every
 * instance after a Postgres restart): a thousand kits connecting in the same second each wait for the server
 * to fork a backend and authenticate them, and a storm of them misses a connect timeout of a few seconds.
 * Retried on a fixed schedule they would come back together, in the same storm, every time; with jitter they
 * spread out, and the server answers the ones in front while the others wait their turn.
 * @module
 */

/**
 * The wait before retry `attempt` (0-based): exponential from `minMs`, capped at `maxMs`, and drawn uniformly
 * from its upper half ("equal jitter"), so a retry never comes back sooner than half the schedule yet two
 * kits on the same schedule come back apart.
 */
export function jitteredBackoffMs(attempt: number, minMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, minMs * 2 ** Math.max(0, Math.min(attempt, 30)));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/**
 * Whether a failure to reach Postgres is worth another try: the server or the path is busy or starting
 * (a timeout, a refused or reset connection, too many connections, the server starting up or shutting
 * down). A wrong password, a missing database or a missing schema is not: those fail at once, however many
 * times they are asked.
 */
export function isTransientConnectError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : '';
  // too_many_connections, cannot_connect_now, admin/crash shutdown, connection_failure class.
  if (['53300', '57P03', '57P01', '57P02', '08000', '08003', '08006', '08001', '08004'].includes(code)) return true;
  if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(code)) return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  // node-postgres's own connect timeout and a socket the server closed during the handshake carry no code.
  return /timeout|timed out|Connection terminated unexpectedly/i.test(message);
}

export interface ConnectRetryOptions {
  /** At most this many tries in all (≥ 1). */
  attempts: number;
  minMs: number;
  maxMs: number;
  /** Told before each wait: the failure, the retry about to be made (1-based) and the wait. */
  onRetry?: (err: unknown, retry: number, waitMs: number) => void;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/** Runs `fn`, retrying transient connect failures (isTransientConnectError) up to `attempts` tries with jittered waits. */
export async function withConnectRetries<T>(fn: () => Promise<T>, o: ConnectRetryOptions): Promise<T> {
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref()));
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt + 1 >= o.attempts || !isTransientConnectError(err)) throw err;
      const waitMs = jitteredBackoffMs(attempt, o.minMs, o.maxMs, o.random);
      o.onRetry?.(err, attempt + 1, waitMs);
      await sleep(waitMs);
    }
  }
}
