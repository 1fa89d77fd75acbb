import { DBOSClient } from '@dbos-inc/dbos-sdk';
import { type Message, PubSub } from '@google-cloud/pubsub';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureSubscription } from '../../../shared/events/bridge.js';
import type { DrainProgress } from '../../../shared/drain/index.js';
import { type TestDatabase, uniqueName, waitFor, workflowRows } from '../../helpers/db.js';
import { kitEnv, statuses } from '../../helpers/kit.js';
import { type Plane, startPlane } from '../../helpers/plane.js';

/**
 * Through the served `drain` function: a planned drain of v1 stops its executors
 * claiming queued work (new work goes to v2), lets them finish what they hold and report drained, with
 * GET showing progress and then `done`; bad requests get 400 with the reason, an unknown version an empty
 * report.
 */
const emulatorHost = inject('pubsubEmulatorHost');
if (!emulatorHost) console.warn('!!! SKIPPED: planned drain with leftovers → death notice (Pub/Sub emulator not installed)');

describe('drain function', () => {
  let plane: Plane;
  let tdb: TestDatabase;
  let client: DBOSClient | undefined;
  const app = uniqueName('app-drain');
  const queues = { agents: {} };

  const post = (body: unknown, raw = false) =>
    fetch(plane.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: raw ? String(body) : JSON.stringify(body) });
  const progress = async (version: string) => {
    const res = await fetch(`${plane.url}/?applicationVersion=${encodeURIComponent(version)}`);
    expect(res.status).toBe(200);
    return (await res.json()) as DrainProgress;
  };

  beforeAll(async () => {
    plane = await startPlane({ app, target: 'drain' });
    tdb = plane.tdb;
  });
  afterAll(async () => {
    await client?.destroy();
    await plane?.close();
  });

  it('bad requests get 400 with the reason; an unknown version is an empty report', async () => {
    const cases: Array<[unknown, RegExp, boolean?]> = [
      [{}, /exactly one of applicationVersion or executorIds/],
      [{ applicationVersion: 'v1', executorIds: ['x'] }, /exactly one/],
      [{ executorIds: [] }, /executorIds must not be empty/],
      [{ applicationVersion: '' }, /applicationVersion/],
      [{ applicationVersion: 'v1', budgetMs: -5 }, /budgetMs/],
      [{ applicationVersion: 'v1', callbackUrl: 'http://attacker.example/' }, /callbackUrl/],
      [{ executorIds: 'exec-1' }, /executorIds/],
      ['{not json', /./, true],
    ];
    for (const [body, reason, raw] of cases) {
      const res = await post(body, raw);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const text = await res.text();
      expect(text, JSON.stringify(body)).toMatch(reason);
    }
    const noQuery = await fetch(plane.url);
    expect(noQuery.status).toBe(400);
    expect(await noQuery.text()).toMatch(/applicationVersion/);
    expect((await fetch(plane.url, { method: 'PUT' })).status).toBe(405);
    const empty = {
      applicationName: app,
      applicationVersion: 'no-such-version',
      executors: [],
      pending: 0,
      enqueued: 0,
      done: true,
      heartbeatsKnown: true,
    };
    expect(await progress('no-such-version')).toEqual(empty);
    // No drain request was written by any of the bad requests.
    expect((await tdb.sql.query('SELECT 1 FROM afterlife.drain_requests')).rowCount).toBe(0);
    // POST for a version nothing runs: the same empty report. The request is kept, for instances of that
    // version that start later.
    const posted = await post({ applicationVersion: 'no-such-version' });
    expect(posted.status).toBe(202);
    const body = (await posted.json()) as DrainProgress & { requestIds: number[]; budgetMs: number };
    expect(body).toMatchObject(empty);
    expect(body.requestIds).toHaveLength(1);
  });

  it('v1 stops claiming, finishes what it holds, reports drained; new work goes to v2; GET shows progress then done', async () => {
    const env = kitEnv({ ttlMs: 1_500 });
    const v1 = await plane.start({ applicationVersion: 'v1', executorId: 'exec-v1', queues, env });
    await plane.start({ applicationVersion: 'v2', executorId: 'exec-v2', queues, env });
    const held = ['d-0', 'd-1', 'd-2'];
    for (const id of held) await v1.start(id, { steps: 4, stepMs: 700 });
    await waitFor('v1 beating', async () => (await progress('v1')).executors[0]?.state === 'alive');

    const res = await post({ applicationVersion: 'v1', budgetMs: 30_000 });
    expect(res.status).toBe(202);
    const accepted = (await res.json()) as DrainProgress & { requestIds: number[]; budgetMs: number };
    expect(accepted.requestIds).toHaveLength(1);
    expect(accepted.budgetMs).toBe(30_000);
    expect(accepted.executors.map((e) => e.executorId)).toEqual(['exec-v1']);
    expect(accepted.done).toBe(false);

    const seen = new Set<string>();
    const during = await waitFor('v1 draining', async () => {
      const p = await progress('v1');
      seen.add(p.executors[0]?.state ?? 'none');
      return p.executors[0]?.state === 'draining' ? p : undefined;
    });
    expect(during.done).toBe(false);
    expect(during.pending).toBeGreaterThan(0);
    expect(during.executors[0]?.heartbeatAgeMs).toBeLessThan(1_500);

    // New work while v1 drains: unpinned work goes to the latest version (v2); work pinned to v1 waits,
    // because the draining v1 executor no longer dequeues.
    client = await DBOSClient.create({ systemDatabaseUrl: tdb.url });
    await client.enqueue({ queueName: 'agents', workflowName: 'agentWorkflow', workflowID: 'd-new' }, { steps: 1, stepMs: 10 });
    await client.enqueue(
      { queueName: 'agents', workflowName: 'agentWorkflow', workflowID: 'd-pinned', appVersion: 'v1' },
      { steps: 1, stepMs: 10 },
    );

    const done = await waitFor(
      'drain done',
      async () => {
        const p = await progress('v1');
        seen.add(p.executors[0]?.state ?? 'none');
        return p.done ? p : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(done.executors).toMatchObject([{ executorId: 'exec-v1', state: 'drained', pending: 0, inFlight: 0 }]);
    expect(seen.has('draining')).toBe(true);
    // Done, yet the work pinned to v1 is stranded in the queue: the report counts it for the pipeline.
    expect(done.enqueued).toBe(1);

    // What v1 held finished on v1, each step once; no recovery was needed.
    expect(await statuses(tdb.sql, held)).toEqual({ SUCCESS: 3 });
    expect((await workflowRows(tdb.sql, held)).every((r) => r.executor_id === 'exec-v1')).toBe(true);
    const twice = await tdb.sql.query(
      `SELECT workflow_id, step FROM public.step_runs WHERE phase = 'start' AND workflow_id = ANY($1) GROUP BY 1, 2 HAVING count(*) > 1`,
      [held],
    );
    expect(twice.rows).toEqual([]);
    expect((await tdb.sql.query('SELECT 1 FROM afterlife.recoveries')).rowCount).toBe(0);

    await waitFor('new work done on v2', async () => (await workflowRows(tdb.sql, ['d-new']))[0]?.status === 'SUCCESS');
    const [fresh] = await workflowRows(tdb.sql, ['d-new']);
    expect(fresh?.executor_id).toBe('exec-v2');
    const [pinned] = await workflowRows(tdb.sql, ['d-pinned']);
    expect(pinned?.status).toBe('ENQUEUED');

    // v1 stays up idle (not configured to exit) and keeps reporting drained; v2 is untouched.
    expect(v1.child.exitCode).toBeNull();
    expect((await progress('v2')).executors).toMatchObject([{ executorId: 'exec-v2', state: 'alive' }]);
    const reg = await tdb.sql.query(`SELECT executor_id, state FROM afterlife.executors WHERE application_name = $1 ORDER BY 1`, [app]);
    expect(reg.rows).toEqual([
      { executor_id: 'exec-v1', state: 'drained' },
      { executor_id: 'exec-v2', state: 'alive' },
    ]);
  });

  it('POST by executor IDs reports each executor, unknown ones as unknown', async () => {
    const res = await post({ executorIds: ['exec-v2', 'ghost'] });
    expect(res.status).toBe(202);
    const body = (await res.json()) as DrainProgress;
    // The request is NOTIFYed to the kit, which may already have begun draining by the time the report is
    // read: either state is the truth at that moment.
    expect(body.executors.map((e) => e.executorId)).toEqual(['exec-v2', 'ghost']);
    expect(['alive', 'draining']).toContain(body.executors[0]?.state);
    expect(body.executors[1]?.state).toBe('unknown');
    expect(body.done).toBe(false);
  });

  it('work that outlives the drain budget makes the executor exit even when it would stay up', async () => {
    // Not configured to exit, and no publisher (no emulator needed): after the budget DBOS is shut down but
    // the workflow's code still runs here, so the kit exits rather than idle beside it.
    const v4 = await plane.start({ applicationVersion: 'v4', executorId: 'exec-v4', env: kitEnv({ ttlMs: 1_500 }) });
    await v4.start('d-stranded', { steps: 3, stepMs: 2_000 });
    await waitFor('v4 beating with d-stranded in flight', async () => (await progress('v4')).executors[0]?.inFlight === 1);
    expect((await post({ executorIds: ['exec-v4'], budgetMs: 1_000 })).status).toBe(202);
    const exit = await Promise.race([
      v4.exited,
      new Promise((r) => setTimeout(() => r('still running 15 s after the drain request'), 15_000)),
    ]);
    expect(exit, v4.output.join('')).toEqual({ code: 0, signal: null });
    expect(v4.output.join('')).toContain('executor_drain_exit');
    const p = await progress('v4');
    expect(p.executors).toMatchObject([{ executorId: 'exec-v4', state: 'drained', pending: 1, heartbeatAgeMs: null }]);
    expect(p.done).toBe(false);
  });

  it.skipIf(!emulatorHost)('a drain budget that runs out hands the leftovers over (reason drained) and exits when configured', async () => {
    const topic = uniqueName('executor-deaths');
    const pubsub = new PubSub({ projectId: 'afterlife-test', apiEndpoint: emulatorHost ?? '' });
    const sub = await ensureSubscription(pubsub, topic, `${topic}-sub`);
    const notices: unknown[] = [];
    sub.on('message', (m: Message) => {
      notices.push(JSON.parse(m.data.toString()));
      m.ack();
    });
    try {
      const env = kitEnv({ ttlMs: 1_500, topic, emulatorHost, env: { AFTERLIFE_EXIT_AFTER_DRAIN: 'true' } });
      const v3 = await plane.start({ applicationVersion: 'v3', executorId: 'exec-v3', env });
      await v3.start('d-long', { steps: 3, stepMs: 2_000 });
      await waitFor('v3 beating', async () => (await progress('v3')).executors[0]?.state === 'alive');
      expect((await post({ executorIds: ['exec-v3'], budgetMs: 1_000 })).status).toBe(202);
      expect(await v3.exited).toEqual({ code: 0, signal: null });
      await waitFor('death notice', async () => notices.length > 0);
      expect(notices[0]).toMatchObject({
        type: 'executor.dead',
        executorId: 'exec-v3',
        applicationName: app,
        applicationVersions: ['v3'],
        reason: 'drained',
      });
      // Exited after draining: reported drained, but not done while its leftover is PENDING (recovery's job).
      const p = await progress('v3');
      expect(p.executors).toMatchObject([{ executorId: 'exec-v3', state: 'drained', pending: 1, heartbeatAgeMs: null }]);
      expect(p.done).toBe(false);
    } finally {
      sub.removeAllListeners('message');
      await sub.close();
      await pubsub.close();
    }
  });
});
