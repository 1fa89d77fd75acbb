import type { Redis } from 'ioredis';
import { deleteHeartbeat, type HeartbeatValue, writeHeartbeat } from '../contract/heartbeat.js';
import { SETTINGS } from '../contract/settings.js';
import { withTimeout } from '../lifecycle/orderedShutdown.js';
import type { Logger } from '../log.js';

/**
 * The kit's heartbeat: the Redis key `{prefix}:{app}:hb:{executorId}`, rewritten every `intervalMs` with a
 * PX TTL. The interval is what detection waits on (a crashed executor's beat is "stale" after two of them);
 * the TTL only bounds how long a silent key lingers and is the heartbeat-only rule's tolerance. One beat is
 * bounded by its interval, retry included: a Redis that never answers must not pile up beats or hold up
 * attach. A miss is never fatal, but a heartbeat that could not be written for a whole TTL is logged loudly
 * (event `heartbeat_lost`) — without the liveness lock the reaper would now declare this executor dead.
 */
export const DEFAULT_HEARTBEAT_TTL_MS: number = SETTINGS.HEARTBEAT_TTL_MS.default;
export const DEFAULT_HEARTBEAT_INTERVAL_MS: number = SETTINGS.HEARTBEAT_INTERVAL_MS.default;

export interface HeartbeatOptions {
  redis: Redis;
  /** The key's PX TTL: how long a silent key lingers, and the heartbeat-only rule's tolerance. */
  ttlMs: number;
  /** The beat's cadence: what detection waits on. */
  intervalMs: number;
  /** What each beat writes, read at the beat. */
  value: () => HeartbeatValue;
  log: Logger;
  /** The key's prefix (default `afterlife`): each beat also refreshes the app's heartbeat index (packages/executor/src/contract/heartbeat.ts). */
  prefix?: string;
}

export class Heartbeat {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private lastOkAt = Date.now();
  private lost = false;
  private failures = 0;
  private lastWarnAt = 0;
  /** Times the heartbeat went unwritten for a TTL (process lifetime). */
  lostCount = 0;
  private readonly redis: Redis;
  private readonly ttlMs: number;
  readonly intervalMs: number;
  private readonly value: () => HeartbeatValue;
  private readonly log: Logger;
  private readonly prefix: string;

  constructor(o: HeartbeatOptions) {
    this.redis = o.redis;
    this.ttlMs = o.ttlMs;
    this.intervalMs = o.intervalMs;
    this.value = o.value;
    this.log = o.log;
    this.prefix = o.prefix ?? 'afterlife';
  }

  start(): void {
    this.timer = setInterval(() => void this.beat(), this.intervalMs);
  }

  /** Writes one beat now. Nothing is written once stop() has begun: the key's DEL must be the last word. */
  async beat(): Promise<void> {
    const deadline = Date.now() + Math.max(100, this.intervalMs);
    for (let attempt = 1; ; attempt++) {
      if (this.stopped) return;
      try {
        await withTimeout(writeHeartbeat(this.redis, this.value(), this.ttlMs, this.prefix), Math.max(1, deadline - Date.now()));
        this.ok();
        return;
      } catch (err) {
        const pause = Math.min(100, this.intervalMs / 4);
        if (attempt === 2 || deadline - Date.now() <= pause) {
          this.failed(err);
          return;
        }
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  }

  private ok(): void {
    if (this.lost) {
      this.log.notice('heartbeat written again', { silentMs: Date.now() - this.lastOkAt, event: 'heartbeat_restored' });
      this.lost = false;
    }
    this.lastOkAt = Date.now();
  }

  private failed(err: unknown): void {
    const silentMs = Date.now() - this.lastOkAt;
    // Beats come several times a second: one line a second at most, with the count it stands for.
    this.failures += 1;
    if (Date.now() - this.lastWarnAt >= 1_000) {
      this.log.warn('heartbeat write failed; the next beat retries', { err, silentMs, failures: this.failures, event: 'heartbeat_failed' });
      this.lastWarnAt = Date.now();
      this.failures = 0;
    }
    if (!this.lost && silentMs >= this.ttlMs) {
      this.lost = true;
      this.lostCount += 1;
      this.log.error('heartbeat not written for a whole TTL: only the liveness lock now vouches for this executor', {
        silentMs,
        ttlMs: this.ttlMs,
        lostCount: this.lostCount,
        err,
        event: 'heartbeat_lost',
      });
    }
  }

  /** Stops beating and deletes the key: a key deleted is a clean exit, a key that expires is a crash. */
  async stop(capMs: number): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    const { applicationName, executorId } = this.value();
    await withTimeout(deleteHeartbeat(this.redis, applicationName, executorId, this.prefix), capMs).catch((err: unknown) =>
      this.log.warn('heartbeat delete failed; it expires with its TTL', { err }),
    );
  }
}
