import { Redis } from 'ioredis';
import { heartbeatKey } from '../../shared/heartbeat/index.js';
import type { ExecutorHandle } from './executor.js';

/**
 * Stands in for the executor kit's heartbeat (issue #3) until the kit lands: writes the contract's key and
 * value every TTL/3 with a PX TTL, for as long as the executor's child process lives. A SIGKILLed child
 * stops beating the moment it exits, exactly like the kit inside it would.
 * TODO(lead): once shared/executor is merged, start the agent app with the kit and drop this helper.
 */
export interface Beater {
  stop(): void;
  /** Resolves after the first beat has been written. */
  ready: Promise<void>;
}

export function beatWhileAlive(o: {
  redisUrl: string;
  applicationName: string;
  executor: ExecutorHandle;
  applicationVersion: string;
  ttlMs: number;
  redis?: Redis;
}): Beater {
  // Reconnects every 100 ms, as a kit should, so a restarted Redis has its keys back within a beat.
  const redis = o.redis ?? new Redis(o.redisUrl, { maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: 1_000, retryStrategy: () => 100 });
  redis.on('error', () => undefined);
  const key = heartbeatKey(o.applicationName, o.executor.executorId);
  const startedAt = new Date().toISOString();
  let stopped = false;
  const beat = async () => {
    if (stopped || o.executor.child.exitCode !== null || o.executor.child.signalCode !== null) return;
    const value = {
      executorId: o.executor.executorId,
      applicationName: o.applicationName,
      applicationVersion: o.applicationVersion,
      state: 'alive',
      startedAt,
      beatAt: new Date().toISOString(),
      inFlight: 0,
    };
    // A failed beat (Redis restarting) is retried by the next one, as the kit does.
    await redis.set(key, JSON.stringify(value), 'PX', o.ttlMs).catch(() => undefined);
  };
  const timer = setInterval(() => void beat(), Math.max(50, Math.floor(o.ttlMs / 3)));
  const stop = () => {
    stopped = true;
    clearInterval(timer);
    if (!o.redis) redis.disconnect();
  };
  void o.executor.exited.then(stop);
  return { stop, ready: waitReadyThenBeat(redis, beat) };
}

async function waitReadyThenBeat(redis: Redis, beat: () => Promise<void>): Promise<void> {
  if (redis.status !== 'ready') await new Promise<void>((r) => redis.once('ready', () => r()));
  await beat();
}
