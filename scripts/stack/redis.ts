import { execFileSync } from 'node:child_process';
import { freePort, readyOrStop, spawnManaged } from './proc.js';

/**
 * Redis for the local stack: REDIS_URL when set, else a throwaway `redis-server` on a free port when one
 * is installed (no npm package ships the binary), else none — afterlife then runs degraded, as it would in
 * production with Memorystore down: recovery still runs, without the lock and without heartbeat evidence.
 */
export type StackRedis =
  | { kind: 'external' | 'local'; url: string; stop(): Promise<void> }
  | { kind: 'none'; url: undefined; reason: string; stop(): Promise<void> };

export async function startRedis(o: { redisUrl: string | undefined; binary?: string; signal?: AbortSignal }): Promise<StackRedis> {
  if (o.redisUrl) return { kind: 'external', url: o.redisUrl, stop: async () => {} };
  const binary = o.binary ?? which('redis-server');
  if (!binary) {
    return { kind: 'none', url: undefined, reason: 'REDIS_URL is unset and no redis-server is installed', stop: async () => {} };
  }
  const port = await freePort();
  const proc = spawnManaged('redis-server', binary, ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no']);
  await readyOrStop(proc, proc.waitForLine(/Ready to accept connections/, 10_000), o.signal);
  return { kind: 'local', url: `redis://127.0.0.1:${port}`, stop: () => proc.stop() };
}

export function which(cmd: string): string | undefined {
  try {
    const out = execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim();
    return out || undefined;
  } catch {
    return undefined;
  }
}
