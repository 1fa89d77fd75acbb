import { type ChildProcess, spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from './services.js';

/**
 * A private redis-server for tests that flush, kill or restart Redis: the shared test Redis belongs to
 * every suite running at the same time, so it must never be flushed.
 */
export interface PrivateRedis {
  url: string;
  /** SIGKILL: unreachable at once, and every key is lost (no persistence). */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty. */
  start(): Promise<void>;
  flushAll(): Promise<void>;
  stop(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let proc: ChildProcess | undefined;
  const start = async () => {
    proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => undefined);
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        await probe.connect();
        await probe.ping();
        break;
      } catch {
        if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not start`);
        probe.disconnect();
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    probe.disconnect();
  };
  const kill = async () => {
    const p = proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url,
    kill,
    start,
    flushAll: async () => {
      const c = new Redis(url, { maxRetriesPerRequest: 0 });
      await c.flushall();
      c.disconnect();
    },
    stop: kill,
  };
}
