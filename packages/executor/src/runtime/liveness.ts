import pg from 'pg';
import { Fence, type FenceVerdict } from '../contract/fenceCheck.js';
import { drainChannel, fenceChannel } from '../contract/fenceChannel.js';
import { requeuedChannel, RequeuedNotice } from '../contract/requeued.js';
import { askFence, type BackendIdentity, backendIdentity, inheritedIdleSessionTimeoutMs, takeLiveness } from '../db/queries/liveness.js';
import { effectiveLease, LIVENESS_FENCE_EVERY_MS, LIVENESS_RENEW_EVERY_MS, MIN_LIVENESS_LEASE_MS } from '../contract/lease.js';
import { livenessLeaseMs } from '../contract/settings.js';
import type { Logger } from '../log.js';
import {
  describeMove,
  inconclusiveRefusal,
  NotOneSessionError,
  ProbeInconclusiveError,
  proveOneSession,
  sameBackend,
} from './sessionProbe.js';
import { jitteredBackoffMs } from './connectRetry.js';
import { KitTrouble } from './throttle.js';
import { livenessSessionName } from '../contract/sessionName.js';

export { livenessSessionName };

/**
 * The liveness lease: a session-level advisory lock keyed by application and executor ID, held on one
 * connection of the kit's own (never DBOS's pool, whose sessions come and go), whose session the *server*
 * ends once the process has sent nothing for the lease (`idle_session_timeout`, packages/executor/src/contract/lease.ts).
 * Speaking on it once a second (LIVENESS_RENEW_EVERY_MS) is what renews it. So the lock means "this process
 * spoke within the lease", through any proxy between them: a process that dies closes its socket (free at
 * once); a host that vanishes, or a process frozen past the lease, is let go by the server a lease later.
 * Server-side TCP keepalives and `tcp_user_timeout` stay too: on a direct path they notice a vanished host on
 * their own (about `VANISHED_HOST_S`), and they never end a live session.
 *
 * The same connection carries the fence: a NOTIFY on the fence channel is only a hint to ask now; the
 * answer is always the plane's own records (registry, recoveries; packages/executor/src/contract/fenceCheck.ts), asked
 * at every connect, on a hint, and otherwise as every `FENCE_EVERY`-th renewal (LIVENESS_FENCE_EVERY_MS, a
 * backstop); the renewals in between are empty queries, the cheapest message that resets the server's timer.
 * This incarnation is registered, and the fence question answered, before the lock is
 * taken, so a process back from a partition stops before it claims to be alive. With `onRequeued` it also
 * listens for recoveries asking this executor to claim their work now (contract/requeued.ts): the session is
 * already open and held for the lease, so hearing them costs the fleet no connection.
 *
 * Every session is first proven to be one server session (sessionProbe.ts): behind a pooler in transaction
 * mode the lock would outlive the process, so the kit refuses it before taking anything (a probe that cannot
 * tell is a refusal too), and compares its
 * backend every `IDENTITY_EVERY` checks afterwards (a move later ends the liveness protocol for good, with
 * an ERROR naming the fix; `onNotASession`).
 *
 * A lost connection is re-made by one timer with a bounded, jittered backoff — never more than one attempt in
 * flight, never more than one session — and its failures are logged at most once a minute (KitTrouble). The
 * jitter and a connect timeout that grows with each failure are what let a fleet that lost Postgres together
 * (a restart) or starts together (a deploy) come back without a storm of connects that all time out.
 */
/** Renewals per fence question when nothing hinted one (contract/lease.ts). */
const FENCE_EVERY = Math.max(1, Math.round(LIVENESS_FENCE_EVERY_MS / LIVENESS_RENEW_EVERY_MS));
/** tcp_keepalives_idle 5 s + 3 probes 2 s apart, or unacknowledged data for 10 s (tcp_user_timeout). */
export const VANISHED_HOST_S = 11;
const KEEPALIVES =
  'SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3; SET tcp_user_timeout = 10000; SET statement_timeout = 5000';
const RECONNECT_MIN_MS = 100;
/** Bounded: after a Postgres restart the lock must be back well within the reaper's settle time (10 s). */
export const RECONNECT_MAX_MS = 5_000;
/** The first connect's timeout; doubled after each failed one up to CONNECT_TIMEOUT_MAX_MS (a busy server forks slowly). */
const CONNECT_TIMEOUT_MS = 2_000;
const CONNECT_TIMEOUT_MAX_MS = 8_000;
/** Fence checks between two comparisons of the session's backend with the one proven at connect. */
const IDENTITY_EVERY = 5;
/** How long a closing session may take to go before the next attempt is made anyway. */
const END_WAIT_MS = 1_000;

export interface LivenessOptions {
  databaseUrl: string;
  applicationName: string;
  executorId: string;
  afterlifeSchema: string;
  /** When the kit started: recoveries since then that moved our rows fence us. */
  since: Date;
  /** This process start of the executor ID; fencing compares it with the registry's. */
  incarnation?: string;
  /** The lease (default DEFAULT_LIVENESS_LEASE_MS); validated: an unsafe value is a ConfigError. */
  leaseMs?: number;
  /** After every (re)connect: idle_session_timeout as the liveness session reports it once the kit set it. */
  onLease?: (serverLeaseMs: number) => void;
  /** How often the session is spoken on (default LIVENESS_RENEW_EVERY_MS); every FENCE_EVERY-th time it is the fence question. */
  checkEveryMs?: number;
  logger: Logger;
  /** Shared with the rest of the kit so that one missing schema is one line a minute, not one per module. */
  trouble?: KitTrouble;
  /** Registers this incarnation; retried on every connection until it succeeds, and always before the lock. */
  register?: () => Promise<void>;
  /** A drain request was written for this application (contract/fenceChannel.ts): look for it now. */
  onDrainHint?: () => void;
  /** A recovery named this executor to claim what it re-enqueued now: the queues (contract/requeued.ts). */
  onRequeued?: (notice: RequeuedNotice) => void;
  /** Whether a notice could buy a poll now (the kit's poll budget); when not, notices are dropped unparsed. */
  requeuedWanted?: () => boolean;
  /** Called once when the executor learns it was declared dead, superseded, or its workflows were moved. */
  onFenced: (verdict: FenceVerdict, fence?: Fence) => void;
  /**
   * The liveness connection turned out not to be one server session after `start` (a transaction-mode pooler):
   * the lock is given up and the protocol stopped for good. At `start` the same refusal rejects instead.
   */
  onNotASession?: (err: NotOneSessionError) => void;
}

export class LivenessLock {
  private client: pg.Client | undefined;
  private closed = false;
  private heldNow = false;
  private registered: boolean;
  private timer: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  /** Connects that failed in a row: the next wait and connect timeout grow with it. */
  private failures = 0;
  private connecting: Promise<void> | undefined;
  private ending: Promise<void> | undefined;
  private warnedBusy = false;
  private checking = false;
  private askAgain: 'renew' | 'fence' | undefined;
  /** Renewals since the last fence question. */
  private sinceFence = 0;
  private leaseLogged = false;
  /** The server session proven at connect (sessionProbe.ts); compared every IDENTITY_EVERY checks. */
  private backend: BackendIdentity | undefined;
  private checksSinceIdentity = 0;
  /** Why this connection is refused for good: it is not one server session. */
  private refused: NotOneSessionError | undefined;
  private readonly channel: string;
  private readonly requeued: string;
  private readonly quotedId: string;
  private readonly drain: string;
  private readonly gone = new WeakSet<pg.Client>();
  private readonly trouble: KitTrouble;
  /** The lease asked of the server (the configured one, or a shorter one inherited from the URL or role). */
  leaseMs: number;

  constructor(private readonly o: LivenessOptions) {
    this.channel = fenceChannel(o.afterlifeSchema);
    this.requeued = requeuedChannel(o.afterlifeSchema);
    this.quotedId = JSON.stringify(o.executorId);
    this.drain = drainChannel(o.afterlifeSchema);
    this.leaseMs = livenessLeaseMs(o.leaseMs);
    this.registered = o.register === undefined;
    this.trouble = o.trouble ?? new KitTrouble(o.logger, o.afterlifeSchema);
  }

  /** Whether this process holds its liveness lock right now (as far as it knows). */
  get held(): boolean {
    return this.heldNow;
  }

  /**
   * Connects and takes the lock; resolves either way (a failure is retried in the background), except that a
   * connection that is not one server session rejects with NotOneSessionError, holding nothing.
   */
  async start(): Promise<void> {
    await this.connect();
    if (this.refused) throw this.refused;
    this.timer = setInterval(
      () => void this.check(++this.sinceFence >= FENCE_EVERY ? 'fence' : 'renew'),
      this.o.checkEveryMs ?? LIVENESS_RENEW_EVERY_MS,
    );
    this.timer.unref();
  }

  private connect(): Promise<void> {
    this.connecting ??= this.open().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async open(): Promise<void> {
    // The previous session is gone (or given up on) before another is opened: one liveness session at a time.
    if (this.ending) await this.ending;
    if (this.closed || this.client) return;
    const client = new pg.Client({
      connectionString: this.o.databaseUrl,
      application_name: livenessSessionName(this.o.executorId, this.o.incarnation),
      keepAlive: true,
      keepAliveInitialDelayMillis: 5_000,
      connectionTimeoutMillis: Math.min(CONNECT_TIMEOUT_MAX_MS, CONNECT_TIMEOUT_MS * 2 ** Math.min(this.failures, 3)),
      // Longer than a freeze the process should ride out: a reply already waiting when it wakes must win
      // over this timer, or the session (and the lock) would be dropped for nothing.
      query_timeout: 10_000,
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, undefined));
    client.on('notification', (n) => this.notified(n));
    try {
      await client.connect();
      // Before anything session-level (lease, LISTEN, lock) lands on a backend it may not keep.
      this.backend = await proveOneSession(client, this.o.databaseUrl, probeSessionName(this.o.executorId));
      this.checksSinceIdentity = 0;
      await this.lease(client);
      // LISTEN before the fence question, so a declaration committed in between is still heard (this session's
      // own subscription is the fence protocol, so it stays beside it rather than in the SQL layer).
      await client.query(`LISTEN ${pg.escapeIdentifier(this.channel)}`);
      if (this.o.onRequeued) await client.query(`LISTEN ${pg.escapeIdentifier(this.requeued)}`);
      if (this.o.onDrainHint) await client.query(`LISTEN ${pg.escapeIdentifier(this.drain)}`);
      this.client = client;
      if (!this.registered && this.o.register) {
        await this.o.register();
        this.registered = true;
      }
      if (await this.fenced(client)) return;
      this.sinceFence = 0;
      await this.take(client);
      this.failures = 0;
      this.trouble.ok('liveness');
    } catch (err) {
      if (err instanceof NotOneSessionError) this.refuse(client, err);
      // At attach a pooler not ruled out is a refusal; later the lock waits for a probe that rules it out.
      else if (err instanceof ProbeInconclusiveError && this.timer === undefined)
        this.refuse(client, inconclusiveRefusal(err, this.o.databaseUrl));
      else this.lost(client, err);
    }
  }

  /** Not one server session: give everything up and stop for good (no reconnect: the route is wrong). */
  private refuse(client: pg.Client, err: NotOneSessionError): void {
    const afterStart = this.timer !== undefined;
    this.refused = err;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.retry) clearTimeout(this.retry);
    this.lost(client, undefined);
    if (afterStart) this.o.onNotASession?.(err);
  }

  /** Every IDENTITY_EVERY fence questions: still the backend proven at connect? */
  private async sameSession(client: pg.Client): Promise<boolean> {
    if (++this.checksSinceIdentity < IDENTITY_EVERY || !this.backend) return true;
    this.checksSinceIdentity = 0;
    const now = await backendIdentity(client);
    if (sameBackend(this.backend, now)) return true;
    this.refuse(client, new NotOneSessionError(describeMove(this.backend, now), this.o.databaseUrl));
    return false;
  }

  /**
   * Keepalives, and the lease the server times. A value the URL (`options=-c idle_session_timeout=…`), the
   * role or the database set is read first and never overridden in a way that weakens it (effectiveLease).
   */
  private async lease(client: pg.Client): Promise<void> {
    const inheritedMs = await inheritedIdleSessionTimeoutMs(client);
    const configured = livenessLeaseMs(this.o.leaseMs);
    const { leaseMs, inherited } = effectiveLease(configured, inheritedMs);
    // The lease itself: session settings of this dedicated connection are the liveness protocol, so they stay here.
    await client.query(`${KEEPALIVES}; SET idle_session_timeout = ${String(leaseMs)}`);
    this.leaseMs = leaseMs;
    // The lease as the server now reports it on this session (what doctor checks): read back, not assumed.
    this.o.onLease?.(await inheritedIdleSessionTimeoutMs(client));
    if (this.leaseLogged) return;
    this.leaseLogged = true;
    if (inherited === 'kept') {
      this.o.logger.notice('liveness lease: keeping the shorter idle_session_timeout set on the URL, role or database', {
        leaseMs,
        configuredMs: configured,
        event: 'liveness_lease',
      });
    } else if (inherited === 'unsafe') {
      this.o.logger.warn(
        `liveness lease: the idle_session_timeout set on the URL, role or database (${inheritedMs} ms) is below ${MIN_LIVENESS_LEASE_MS} ms, too short for the kit to keep; using the configured lease`,
        { leaseMs, inheritedMs, event: 'liveness_lease' },
      );
    } else if (inherited === 'longer') {
      this.o.logger.info(
        'liveness lease: the longer idle_session_timeout of the URL, role or database is replaced by the lease on this session',
        { leaseMs, inheritedMs, event: 'liveness_lease' },
      );
    }
  }

  private async take(client: pg.Client): Promise<void> {
    this.heldNow = await takeLiveness(client, this.o.afterlifeSchema, this.o);
    if (this.heldNow) {
      this.warnedBusy = false;
      this.o.logger.debug('liveness lock held', { leaseMs: this.leaseMs });
    } else if (!this.warnedBusy) {
      // Our previous session, not yet ended by the server (at most a lease after a network loss), another
      // process with this executor ID, or a squatter. Only our own registered session counts as held, so a
      // stranger's lock does not make us look alive — nor dead while we beat.
      this.warnedBusy = true;
      this.o.logger.warn(
        'liveness lock held by another session (an old one of ours, ended by the server within a lease, a second process with this executor ID, or a squatter); retrying',
        { event: 'liveness_lock_busy' },
      );
    }
  }

  /**
   * The periodic word on the connection, which renews the lease: the fence question when it is due (or hinted),
   * else an empty query; a lock that was busy is asked for again either way (that statement renews too). A
   * failure of either is a dead link.
   */
  private async check(ask: 'renew' | 'fence'): Promise<void> {
    const client = this.client;
    if (this.closed || this.connecting) return;
    if (this.checking) {
      if (ask === 'fence' || !this.askAgain) this.askAgain = ask;
      return;
    }
    if (!client) {
      this.schedule();
      return;
    }
    this.checking = true;
    try {
      if (ask === 'fence') {
        this.sinceFence = 0;
        if (!(await this.sameSession(client))) return;
        if (await this.fenced(client)) return;
      }
      if (!this.heldNow) await this.take(client);
      else if (ask === 'renew') await client.query('');
    } catch (err) {
      this.lost(client, err);
    } finally {
      this.checking = false;
    }
    const again = this.askAgain;
    if (again) {
      this.askAgain = undefined;
      void this.check(again);
    }
  }

  private async fenced(client: pg.Client): Promise<boolean> {
    const raw = await askFence(client, this.o.afterlifeSchema, {
      applicationName: this.o.applicationName,
      executorId: this.o.executorId,
      since: this.o.since,
      incarnation: this.o.incarnation,
    });
    if (raw === null || raw === undefined) return false;
    const fence = Fence.parse(raw);
    this.o.onFenced(fence.verdict, fence);
    return true;
  }

  /** Anyone who can connect may NOTIFY: a message about this executor only makes the kit ask its records now. */
  private notified(n: pg.Notification): void {
    if (n.channel === this.requeued && n.payload && this.o.onRequeued) return this.requeuedHere(n.payload, this.o.onRequeued);
    if ((n.channel !== this.channel && n.channel !== this.drain) || !n.payload) return;
    try {
      const p = JSON.parse(n.payload) as { applicationName?: unknown; executorId?: unknown };
      // A drain hint costs one poll of the plane's table, whoever sent it.
      if (n.channel === this.drain) {
        if (p.applicationName === this.o.applicationName) this.o.onDrainHint?.();
        return;
      }
      if (p.applicationName === this.o.applicationName && p.executorId === this.o.executorId) void this.check('fence');
    } catch {
      /* not ours */
    }
  }

  /**
   * A notice naming this executor of this application, while the lock is held (a fenced process claims nothing).
   * Anyone who can connect may send these at any rate: before any parsing, a notice is dropped unless the kit
   * holds its lock, has a poll left in its budget (pollNow.ts) and the payload carries this executor's ID as
   * a JSON string (a genuine one, built by Postgres's json_build_object, always does).
   */
  private requeuedHere(payload: string, act: (notice: RequeuedNotice) => void): void {
    if (!this.heldNow || !payload.includes(this.quotedId) || this.o.requeuedWanted?.() === false) return;
    let raw: unknown;
    try {
      raw = JSON.parse(payload);
    } catch {
      return;
    }
    const r = RequeuedNotice.safeParse(raw);
    if (!r.success) {
      this.o.logger.debug('requeued notice ignored: not the contract', { err: r.error.message });
      return;
    }
    if (r.data.applicationName !== this.o.applicationName || !r.data.to.includes(this.o.executorId) || !this.heldNow) return;
    act(r.data);
  }

  private lost(client: pg.Client, err: unknown): void {
    // 'error', 'end' and a failed query can all report one loss: the first one handles it.
    if (this.gone.has(client)) return;
    this.gone.add(client);
    if (this.client === client) this.client = undefined;
    if (this.client === undefined) this.heldNow = false;
    client.removeAllListeners('end');
    client.on('error', () => undefined);
    const ended = client.end().catch(() => undefined);
    this.ending = Promise.race([ended, new Promise<void>((r) => setTimeout(r, END_WAIT_MS).unref())]).finally(
      () => (this.ending = undefined),
    );
    if (this.closed) return;
    const wait = this.schedule();
    if (err) this.trouble.report('liveness', err, { retryInMs: wait });
  }

  /** One reconnect timer at a time, with a bounded, jittered backoff; a connection in progress makes none. */
  private schedule(): number | undefined {
    if (this.closed || this.retry || this.connecting || this.client) return undefined;
    const wait = jitteredBackoffMs(this.failures, RECONNECT_MIN_MS, RECONNECT_MAX_MS);
    this.failures += 1;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.connect();
    }, wait);
    this.retry.unref();
    return wait;
  }

  /** Releases the lock by ending the session (a clean exit reads like any other: the lock is free). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.retry) clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    this.heldNow = false;
    if (client) {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
    }
  }
}

/** The session-probe connection's application_name (sessionProbe.ts), so `pg_stat_activity` says what it is. */
function probeSessionName(executorId: string): string {
  return `afterlife_probe_${executorId}`.slice(0, 63);
}
