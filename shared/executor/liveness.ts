import pg from 'pg';
import { fenceCheckQuery, type FenceVerdict } from '../liveness/fenceCheck.js';
import { fenceChannel, LIVENESS_KEY_SQL } from '../liveness/key.js';
import type { Logger } from '../log.js';

/**
 * The liveness lock: a session-level advisory lock keyed by application and executor ID, held on one
 * connection of the kit's own (never DBOS's pool, whose sessions come and go). When the process dies for
 * any reason, its kernel closes the socket and Postgres ends the session: the lock is free at once, which is
 * the reaper's first witness of death. While the process lives — even frozen or CPU-starved — the session
 * and the lock stay, so a held lock always reads as alive.
 *
 * The same connection carries the fence: it LISTENs for declarations of this executor's death and asks,
 * every `checkEveryMs`, whether the registry says dead or a recovery moved its workflows (the question
 * doubles as the connection's ping). A lost connection is re-made with a short backoff; the lock is taken
 * again only after the fence question is answered, so a process back from a partition stops before it
 * claims to be alive.
 *
 * Server-side TCP keepalives and `tcp_user_timeout` are set on the session, so Postgres notices a host that
 * vanished without closing its sockets in about `VANISHED_HOST_S` seconds instead of Linux's two hours.
 */
export const LIVENESS_CHECK_EVERY_MS = 1_000;
/** tcp_keepalives_idle 5 s + 3 probes 2 s apart, or unacknowledged data for 10 s (tcp_user_timeout). */
export const VANISHED_HOST_S = 11;
const SESSION_SETTINGS = `SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3;
  SET tcp_user_timeout = 10000; SET idle_session_timeout = 0; SET statement_timeout = 5000`;
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 1_000;

export interface LivenessOptions {
  databaseUrl: string;
  applicationName: string;
  executorId: string;
  afterlifeSchema: string;
  /** When the kit started: recoveries since then that moved our rows fence us. */
  since: Date;
  checkEveryMs?: number;
  logger: Logger;
  /** Called once when the executor learns it was declared dead or its workflows were moved. */
  onFenced: (verdict: FenceVerdict) => void;
}

export class LivenessLock {
  private client: pg.Client | undefined;
  private closed = false;
  private heldNow = false;
  private timer: NodeJS.Timeout | undefined;
  private reconnectMs = RECONNECT_MIN_MS;
  private connecting: Promise<void> | undefined;
  private warnedBusy = false;
  private checking = false;
  private readonly channel: string;
  private readonly gone = new WeakSet<pg.Client>();

  constructor(private readonly o: LivenessOptions) {
    this.channel = fenceChannel(o.afterlifeSchema);
  }

  /** Whether this process holds its liveness lock right now (as far as it knows). */
  get held(): boolean {
    return this.heldNow;
  }

  /** Connects and takes the lock; resolves either way (a failure is retried in the background). */
  async start(): Promise<void> {
    await this.connect();
    this.timer = setInterval(() => void this.check(), this.o.checkEveryMs ?? LIVENESS_CHECK_EVERY_MS);
    this.timer.unref();
  }

  private connect(): Promise<void> {
    this.connecting ??= this.open().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async open(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({
      connectionString: this.o.databaseUrl,
      application_name: `afterlife_live_${this.o.executorId}`.slice(0, 63),
      keepAlive: true,
      keepAliveInitialDelayMillis: 5_000,
      connectionTimeoutMillis: 2_000,
      // Longer than a freeze the process should ride out: a reply already waiting when it wakes must win
      // over this timer, or the session (and the lock) would be dropped for nothing.
      query_timeout: 10_000,
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, undefined));
    client.on('notification', (n) => this.notified(n));
    try {
      await client.connect();
      await client.query(SESSION_SETTINGS);
      // LISTEN before the fence question, so a declaration committed in between is still heard.
      await client.query(`LISTEN ${pg.escapeIdentifier(this.channel)}`);
      this.client = client;
      if (await this.fenced(client)) return;
      await this.take(client);
      this.reconnectMs = RECONNECT_MIN_MS;
    } catch (err) {
      this.o.logger.warn('liveness connection failed; retrying', { err, retryInMs: this.reconnectMs });
      this.lost(client, err);
    }
  }

  private async take(client: pg.Client): Promise<void> {
    const res = await client.query<{ ok: boolean }>(
      `SELECT pg_try_advisory_lock(${LIVENESS_KEY_SQL.app('$1::text')}, ${LIVENESS_KEY_SQL.executor('$2::text')}) AS ok`,
      [this.o.applicationName, this.o.executorId],
    );
    this.heldNow = res.rows[0]?.ok === true;
    if (this.heldNow) {
      this.warnedBusy = false;
      this.o.logger.debug('liveness lock held');
    } else if (!this.warnedBusy) {
      // Our previous session, not yet ended by the server after a network loss — or another process
      // running under this executor ID. Either way somebody holds it, so nobody reads us as dead.
      this.warnedBusy = true;
      this.o.logger.warn('liveness lock held by another session (an old one of ours, or a second process with this executor ID); retrying');
    }
  }

  /** The periodic question on the connection; also re-takes a lock that was busy and notices a dead link. */
  private async check(): Promise<void> {
    const client = this.client;
    if (this.closed || this.connecting || this.checking) return;
    if (!client) {
      void this.connect();
      return;
    }
    this.checking = true;
    try {
      if (await this.fenced(client)) return;
      if (!this.heldNow) await this.take(client);
    } catch (err) {
      this.lost(client, err);
    } finally {
      this.checking = false;
    }
  }

  private async fenced(client: pg.Client): Promise<boolean> {
    const q = fenceCheckQuery(this.o.afterlifeSchema, { applicationName: this.o.applicationName, executorId: this.o.executorId, since: this.o.since });
    const res = await client.query<{ verdict: FenceVerdict | null }>(q.text, q.values);
    const verdict = res.rows[0]?.verdict;
    if (!verdict) return false;
    this.o.onFenced(verdict);
    return true;
  }

  private notified(n: pg.Notification): void {
    if (n.channel !== this.channel || !n.payload) return;
    try {
      const p = JSON.parse(n.payload) as { applicationName?: unknown; executorId?: unknown };
      if (p.applicationName === this.o.applicationName && p.executorId === this.o.executorId) this.o.onFenced('dead');
    } catch {
      /* not ours */
    }
  }

  private lost(client: pg.Client, err: unknown): void {
    // 'error', 'end' and a failed query can all report one loss: the first one handles it.
    if (this.gone.has(client)) return;
    this.gone.add(client);
    if (this.client === client) this.client = undefined;
    if (this.client === undefined) this.heldNow = false;
    client.removeAllListeners('end');
    client.on('error', () => undefined);
    void client.end().catch(() => undefined);
    if (this.closed) return;
    if (err) this.o.logger.warn('liveness connection lost; re-taking the lock', { err });
    const wait = this.reconnectMs;
    this.reconnectMs = Math.min(RECONNECT_MAX_MS, this.reconnectMs * 2);
    setTimeout(() => void this.connect(), wait).unref();
  }

  /** Releases the lock by ending the session (a clean exit reads like any other: the lock is free). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    const client = this.client;
    this.client = undefined;
    this.heldNow = false;
    if (client) {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
    }
  }
}
