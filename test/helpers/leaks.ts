import { Redis } from 'ioredis';
import pg from 'pg';
import { ADMIN_DATABASE_URL } from './services.js';

/**
 * Counting what a test could leak: Postgres sessions by database (and application_name), and the clients
 * connected to a private redis-server (the shared one has every other suite's clients on it).
 */
export async function pgSessions(database: string, applicationName?: string): Promise<number> {
  const c = new pg.Client({ connectionString: ADMIN_DATABASE_URL, application_name: 'afterlife-leak-probe' });
  await c.connect();
  try {
    const r = await c.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = $1 AND pid <> pg_backend_pid() AND application_name <> 'afterlife-test' AND ($2::text IS NULL OR application_name = $2)`,
      [database, applicationName ?? null],
    );
    return r.rows[0]?.n ?? 0;
  } finally {
    await c.end();
  }
}

/** Clients connected to the Redis at `url`, not counting the probe itself. */
export async function redisClients(url: string): Promise<number> {
  const probe = new Redis(url, { maxRetriesPerRequest: 0, connectionName: 'afterlife-leak-probe' });
  try {
    const list = String(await probe.call('CLIENT', 'LIST'));
    return list.split('\n').filter((l) => l.trim() && !/ name=afterlife-leak-probe /.test(l)).length;
  } finally {
    probe.disconnect();
  }
}

/** Polls until `count()` is at most `limit` (backends and sockets close asynchronously), or returns the last count. */
export async function settlesTo(count: () => Promise<number>, limit: number, timeoutMs = 5_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const n = await count();
    if (n <= limit || Date.now() > deadline) return n;
    await new Promise((r) => setTimeout(r, 50));
  }
}
