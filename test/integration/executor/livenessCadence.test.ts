import { createServer, type Server, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { FenceVerdict } from '../../../packages/executor/src/contract/fenceCheck.js';
import { LIVENESS_FENCE_EVERY_MS, LIVENESS_RENEW_EVERY_MS } from '../../../packages/executor/src/contract/lease.js';
import { insertDrainRequests } from '../../../packages/executor/src/db/queries/drainRequests.js';
import { findTable } from '../../../packages/executor/src/db/queries/schemaCheck.js';
import { withConnectRetries } from '../../../packages/executor/src/runtime/connectRetry.js';
import { LivenessLock } from '../../../packages/executor/src/runtime/liveness.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { registerIncarnation } from '../../helpers/liveness.js';

/**
 * What the liveness session costs and how it starts: the lease is renewed by empty queries with the fence
 * question only every few renewals (a hint asks it at once), and a connect that fails a few times — a server
 * busy with a fleet's start — is retried with jitter until it holds.
 */

/** A front for Postgres that drops the first `failFirst` connections the moment they open, then pipes. */
async function flakyFront(
  target: URL,
  failFirst: number,
): Promise<{ url: (u: string) => string; dropped: () => number; close: () => Promise<void> }> {
  let dropped = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    client.on('error', () => undefined);
    sockets.add(client);
    if (dropped < failFirst) {
      dropped += 1;
      client.destroy();
      return;
    }
    const upstream = new Socket();
    sockets.add(upstream);
    upstream.on('error', () => client.destroy());
    upstream.connect(Number(target.port || 5432), target.hostname);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: (u: string) => {
      const x = new URL(u);
      x.hostname = '127.0.0.1';
      x.port = String(port);
      return x.toString();
    },
    dropped: () => dropped,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('liveness cadence and attach retries', () => {
  let tdb: TestDatabase;
  let db: ReturnType<typeof afterlifeDb>;
  const app = uniqueName('app-cadence');
  beforeAll(async () => {
    tdb = await createTestDatabase();
    db = afterlifeDb(tdb.url);
  });
  afterAll(async () => {
    await db?.pool.end();
    await tdb?.drop();
  });

  const lock = (
    executorId: string,
    incarnation: string,
    o: { checkEveryMs: number; databaseUrl?: string; onFenced?: (v: FenceVerdict) => void; onDrainHint?: () => void },
  ) =>
    new LivenessLock({
      databaseUrl: o.databaseUrl ?? tdb.url,
      applicationName: app,
      executorId,
      afterlifeSchema: 'afterlife',
      since: new Date(),
      incarnation,
      register: async () => {
        await registerIncarnation(db, app, executorId, incarnation);
      },
      logger: memoryLogger(),
      onFenced: o.onFenced ?? (() => undefined),
      checkEveryMs: o.checkEveryMs,
      ...(o.onDrainHint ? { onDrainHint: o.onDrainHint } : {}),
    });

  it('renews the lease with empty queries and asks the fence question only every few renewals', async () => {
    const l = lock('exec-cadence', 'inc-cadence', { checkEveryMs: 100 });
    await l.start();
    try {
      // Each word the session says is one query_start in pg_stat_activity; its text says which word it was.
      const seen = new Map<string, string>();
      const deadline = Date.now() + 3_000;
      while (Date.now() < deadline) {
        const r = await db.pool.query<{ at: string; query: string }>(
          `SELECT query_start::text AS at, query FROM pg_stat_activity WHERE application_name LIKE 'afterlife_live_exec-cadence@%' AND datname = current_database()`,
        );
        for (const row of r.rows) seen.set(row.at, row.query);
        await new Promise((res) => setTimeout(res, 10));
      }
      const words = [...seen.values()];
      const renewals = words.filter((q) => q === '').length;
      const fences = words.filter((q) => q.includes("'verdict'")).length;
      console.log(`[liveness:cadence] in 3 s at a 100 ms cadence: ${renewals} empty renewals, ${fences} fence questions seen`);
      const perFence = LIVENESS_FENCE_EVERY_MS / LIVENESS_RENEW_EVERY_MS;
      expect(perFence).toBeGreaterThanOrEqual(2);
      expect(fences).toBeGreaterThan(0);
      // Sampling misses some words; the ratio, not the count, is the point.
      expect(renewals).toBeGreaterThanOrEqual((perFence - 1) * fences * 0.6);
      expect(l.held).toBe(true);
    } finally {
      await l.close();
    }
  });

  it('a registration that supersedes a live incarnation hints it: fenced at once, not at the next periodic question', async () => {
    let verdict: FenceVerdict | undefined;
    // Nothing periodic within the test: only the hint can make it ask.
    const old = lock('exec-superseded', 'inc-old', { checkEveryMs: 60_000, onFenced: (v) => (verdict = v) });
    await old.start();
    try {
      expect(old.held).toBe(true);
      const t0 = Date.now();
      await registerIncarnation(db, app, 'exec-superseded', 'inc-new');
      await waitFor('the old incarnation fenced', async () => verdict, { timeoutMs: 5_000, intervalMs: 20 });
      console.log(`[liveness:cadence] superseded incarnation fenced ${Date.now() - t0} ms after the new registration`);
      expect(verdict).toBe('superseded');
    } finally {
      await old.close();
    }
  });

  it("a drain request is heard on the liveness session the moment it is written (the kit's poll is only a backstop)", async () => {
    const hints: number[] = [];
    const l = lock('exec-drain-hint', 'inc-drain-hint', { checkEveryMs: 60_000, onDrainHint: () => hints.push(Date.now()) });
    await l.start();
    try {
      // Another application's request is not this kit's business.
      await insertDrainRequests(db, {
        applicationName: `${app}-other`,
        target: { applicationVersion: 'v9' },
        budgetMs: 1_000,
        requestedBy: 'test',
      });
      const t0 = Date.now();
      await insertDrainRequests(db, { applicationName: app, target: { applicationVersion: 'v9' }, budgetMs: 1_000, requestedBy: 'test' });
      await waitFor('the drain hint', async () => hints.length > 0, { timeoutMs: 5_000, intervalMs: 20 });
      console.log(`[liveness:cadence] drain hint heard ${(hints[0] as number) - t0} ms after the request`);
      expect(hints).toHaveLength(1);
    } finally {
      await l.close();
    }
  });

  it('a liveness connect that fails three times (a busy server) is retried until it holds', async () => {
    const front = await flakyFront(new URL(tdb.url), 3);
    const l = lock('exec-flaky', 'inc-flaky', { checkEveryMs: 200, databaseUrl: front.url(tdb.url) });
    try {
      await l.start();
      await waitFor('the lock held through the front', async () => l.held, { timeoutMs: 20_000, intervalMs: 50 });
      expect(front.dropped()).toBe(3);
    } finally {
      await l.close();
      await front.close();
    }
  });

  it("the attach's first question is retried a bounded number of times on a transient failure, with waits that differ", async () => {
    const front = await flakyFront(new URL(tdb.url), 3);
    const pool = new pg.Pool({ connectionString: front.url(tdb.url), max: 1, connectionTimeoutMillis: 2_000 });
    pool.on('error', () => undefined);
    const waits: number[] = [];
    try {
      const found = await withConnectRetries(() => findTable(pool, 'afterlife.drain_requests'), {
        attempts: 6,
        minMs: 50,
        maxMs: 400,
        onRetry: (_err, _retry, waitMs) => waits.push(waitMs),
      });
      expect(found).toBe('afterlife.drain_requests');
      expect(waits).toHaveLength(3);
      // Bounded, each within its half of the doubling schedule.
      waits.forEach((w, i) => {
        const ceiling = Math.min(400, 50 * 2 ** i);
        expect(w).toBeGreaterThanOrEqual(ceiling / 2);
        expect(w).toBeLessThanOrEqual(ceiling);
      });
    } finally {
      await pool.end();
      await front.close();
    }
    // Fewer tries than failures: the failure is the last one's, after exactly that many tries.
    const front2 = await flakyFront(new URL(tdb.url), 5);
    const pool2 = new pg.Pool({ connectionString: front2.url(tdb.url), max: 1, connectionTimeoutMillis: 2_000 });
    pool2.on('error', () => undefined);
    try {
      await expect(
        withConnectRetries(() => findTable(pool2, 'afterlife.drain_requests'), { attempts: 3, minMs: 10, maxMs: 40 }),
      ).rejects.toThrow();
      expect(front2.dropped()).toBe(3);
    } finally {
      await pool2.end();
      await front2.close();
    }
  });
});
