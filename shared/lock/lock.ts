import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { LockContendedError, LockLostError, LockUnavailableError } from './errors.js';
import { errorMessage, waitReady } from '../../packages/executor/src/plane/index.js';
import { EXTEND, RELEASE } from './scripts.js';

/**
 * A single-instance Redis lock in redlock's `using(resource, ttl, fn(signal))` shape.
 *
 * Why not node-redlock: its 5.0 line has been a beta since 2023 with open issues on quorum errors and on
 * abort semantics (the signal fires late or not at all when an extension fails), and Memorystore is a
 * single primary, so quorum buys nothing. This is ~100 lines: SET NX PX with a random token, Lua
 * compare-and-delete release, token-checked extension on a timer, and an AbortSignal that fires the moment
 * the lock can no longer be proven ours. It saves duplicate work; Postgres stays the correctness fence.
 */
export interface LockOptions {
  /** Extend when this fraction of the TTL has passed (default 1/3). */
  extendAt?: number;
  /** Identifies the holder in logs; the token stays random. */
  owner?: string;
  /** How long to wait for a (re)connecting client before declaring Redis unavailable. */
  connectWaitMs?: number;
}

export class RedisLock {
  constructor(
    private readonly redis: Redis,
    private readonly opts: LockOptions = {},
  ) {}

  async using<T>(resource: string, ttlMs: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const token = `${this.opts.owner ?? 'afterlife'}:${randomBytes(12).toString('hex')}`;
    let acquired: unknown;
    // A client that is (re)connecting gets a moment: a blip should not push every recovery into degraded mode.
    await waitReady(this.redis, this.opts.connectWaitMs ?? 500);
    try {
      acquired = await this.redis.set(resource, token, 'PX', ttlMs, 'NX');
    } catch (err) {
      throw new LockUnavailableError(resource, err);
    }
    if (acquired !== 'OK') throw new LockContendedError(resource);

    const controller = new AbortController();
    let provenUntil = Date.now() + ttlMs;
    const period = Math.max(50, Math.floor(ttlMs * (this.opts.extendAt ?? 1 / 3)));
    const lose = (why: string) => {
      if (!controller.signal.aborted) controller.abort(new LockLostError(resource, why));
    };
    const extend = async () => {
      const started = Date.now();
      try {
        const ok = await this.redis.eval(EXTEND, 1, resource, token, String(ttlMs));
        if (ok === 1) provenUntil = started + ttlMs;
        else lose('token no longer matches (expired or taken over)');
      } catch (err) {
        // Redis is flaky, not necessarily lost: keep going while the last proof still stands.
        if (Date.now() >= provenUntil) lose(`could not extend: ${errorMessage(err)}`);
      }
    };
    const timer = setInterval(() => void extend(), period);
    // The expiry watchdog fires even when the extension calls hang.
    const watchdog = setInterval(
      () => {
        if (Date.now() >= provenUntil) lose('ttl passed without a successful extension');
      },
      Math.max(25, Math.floor(period / 2)),
    );
    timer.unref();
    watchdog.unref();
    try {
      return await fn(controller.signal);
    } finally {
      clearInterval(timer);
      clearInterval(watchdog);
      await this.redis.eval(RELEASE, 1, resource, token).catch(() => undefined); // it expires on its own
    }
  }
}
