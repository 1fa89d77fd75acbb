import type { Message, PubSub } from '@google-cloud/pubsub';
import { describe, expect, inject, it } from 'vitest';
import { type Publisher, PubSubPublisher } from '../../../packages/executor/src/events/publisher.js';
import { repairDepsFromRuntime } from '../../../shared/repair/deps.js';
import { ForkBudgetExhaustedError, getResultWithAutoFork } from '../../../packages/executor/src/repair/index.js';
import type { RepairDeps } from '../../../shared/repair/primitives/deps.js';
import { autoFork } from '../../../shared/repair/situations/divergedFork.js';
import { RECONCILED_BY } from '../../../shared/repair/primitives/reconcile.js';
import type { ReaperState } from '../../../shared/reaper/types.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { uniqueName, waitFor } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';
import { allForks, enqueue, forksOf, ledgerOf, reap, reaperTick, reapUntil, stepStarts, waitStatus, startForkExecutor } from './helpers.js';
import { repairFixture } from '../../helpers/repair.js';

/**
 * A bounded lineage ends in exactly one dead letter (by autoFork, by the real reaper alone, and with the
 * reaper, a second reaper and the app helper racing); a nested fork's budget is counted on the parent's
 * root; five concurrent autoFork calls make one fork; the fork ledger reconciles forks the app helper made
 * (a fresh child it forked never becomes a lineage of its own); FORK_TARGET_VERSION picks the version. All
 * on a real executor running workflows that diverge every time. Dead letters go through the real Pub/Sub emulator; without it only the
 * tests about the published message are skipped.
 */
const emulatorHost = inject('pubsubEmulatorHost');
if (!emulatorHost) console.warn('\n!!! Pub/Sub emulator not available: the dead-letter message tests are SKIPPED\n');
const withEmulator = it.skipIf(!emulatorHost);

describe('fork budget, dead letters, the ledger and races', () => {
  let rt: ReturnType<typeof testRuntime>;
  /** A second reaper's instance: its own pool, Redis connection and DBOS client. */
  let rt2: ReturnType<typeof testRuntime>;
  let pubsub: PubSub | undefined;
  const published: string[] = [];
  const received: Array<{ rootWorkflowId: string; forks: number; workflowId: string }> = [];
  const topic = uniqueName('dead-letters');
  const f = repairFixture('app-budget', {
    divergentChoice: false,
    setupTimeoutMs: 90_000,
    setup: async (f) => {
      let publisher: Publisher | undefined;
      if (emulatorHost) {
        process.env.PUBSUB_EMULATOR_HOST = emulatorHost;
        process.env.METADATA_SERVER_DETECTION = 'none';
        const { PubSub } = await import('@google-cloud/pubsub');
        pubsub = new PubSub({ projectId: 'afterlife-test' });
        f.onClose(() => pubsub?.close());
        const [t] = await pubsub.createTopic(topic);
        const [sub] = await t.createSubscription(`${topic}-sub`);
        sub.on('message', (m: Message) => {
          received.push(JSON.parse(m.data.toString()) as (typeof received)[number]);
          m.ack();
        });
        // The real publisher, counting what afterlife hands it.
        const real = new PubSubPublisher(new PubSub({ projectId: 'afterlife-test' }));
        publisher = {
          publish: (tp, json, attrs, key) => {
            published.push((json as { rootWorkflowId: string }).rootWorkflowId);
            return real.publish(tp, json, attrs, key);
          },
          close: () => real.close(),
        };
      }
      // Five concurrent callers each write the ledger once: a DB budget of 8 keeps 'retry later' (DbBusyError)
      // out of a test about the fork fence. Reapers tick every 250 ms so lineages move quickly.
      const runtime = () =>
        f.runtime({
          poolMax: 8,
          env: { DEAD_LETTER_TOPIC: topic, REAPER_TICK_MS: '250', REPAIR_MODE: 'fork' },
          ...(publisher ? { publisher } : {}),
        });
      rt = runtime();
      rt2 = runtime();
      await startForkExecutor(f, 'exec-1');
    },
  });

  const deadLetters = async (root: string) =>
    (
      await f.tdb.sql.query(
        `SELECT workflow_id, forks, published_at IS NOT NULL AS published FROM afterlife.dead_letters WHERE root_workflow_id = $1`,
        [root],
      )
    ).rows;

  withEmulator('autoFork forks 1, 2, 3, then exactly one dead letter (one row, one message)', async () => {
    const deps = repairDepsFromRuntime(rt);
    await enqueue(f.client, 'alwaysDivergentWorkflow', 'seq', 'v1');
    let current = 'seq';
    for (let n = 1; n <= 3; n++) {
      await waitStatus(f.tdb.sql, current, 'ERROR');
      const res = await autoFork(deps, current);
      expect(res).toMatchObject({ outcome: 'forked', root: 'seq', n, newWorkflowId: `seq-fork-${n}`, startStep: 1 });
      current = `seq-fork-${n}`;
    }
    await waitStatus(f.tdb.sql, 'seq-fork-3', 'ERROR');
    expect(await autoFork(deps, 'seq-fork-3')).toMatchObject({ outcome: 'dead-lettered', root: 'seq', forks: 3, published: true });
    // Again: no second row, no second message, no fourth fork.
    expect(await autoFork(deps, 'seq-fork-3')).toMatchObject({ outcome: 'dead-lettered', published: false });
    expect(await forksOf(f.tdb.sql, 'seq-fork-3')).toEqual([]);
    expect(await deadLetters('seq')).toEqual([{ workflow_id: 'seq-fork-3', forks: 3, published: true }]);
    const ledger = await f.tdb.sql.query(
      `SELECT n, source_workflow_id, from_step FROM afterlife.forks WHERE root_workflow_id = 'seq' ORDER BY n`,
    );
    expect(ledger.rows).toEqual([
      { n: 1, source_workflow_id: 'seq', from_step: 1 },
      { n: 2, source_workflow_id: 'seq-fork-1', from_step: 1 },
      { n: 3, source_workflow_id: 'seq-fork-2', from_step: 1 },
    ]);
    // Step 0 ran once in the whole lineage: every fork copied it.
    for (const id of ['seq-fork-1', 'seq-fork-2', 'seq-fork-3']) expect(await stepStarts(f.tdb.sql, id, 0)).toBe(0);
    await waitFor('the dead-letter message', async () => received.some((m) => m.rootWorkflowId === 'seq'));
    expect(published.filter((r) => r === 'seq')).toEqual(['seq']);
  });

  withEmulator('the real reaper alone forks 1, 2, 3 across its ticks, then exactly one dead letter', async () => {
    await enqueue(f.client, 'alwaysDivergentWorkflow', 'reaped', 'v1');
    await waitStatus(f.tdb.sql, 'reaped', 'ERROR');
    await reapUntil(rt, 'the dead letter of reaped', async () => (await deadLetters('reaped')).some((d) => d.published));
    expect(await allForks(f.tdb.sql)).toEqual(
      expect.arrayContaining(['reaped-fork-1 <- reaped', 'reaped-fork-2 <- reaped-fork-1', 'reaped-fork-3 <- reaped-fork-2']),
    );
    expect(await forksOf(f.tdb.sql, 'reaped-fork-3')).toEqual([]);
    expect(await ledgerOf(f.tdb.sql, 'reaped')).toEqual(
      [1, 2, 3].map((n) => ({
        n,
        source: n === 1 ? 'reaped' : `reaped-fork-${n - 1}`,
        fork: `reaped-fork-${n}`,
        from_step: 1,
        reason: 'diverged',
        child_fork_id: null,
      })),
    );
    expect(await deadLetters('reaped')).toEqual([{ workflow_id: 'reaped-fork-3', forks: 3, published: true }]);
    for (const id of ['reaped-fork-1', 'reaped-fork-2', 'reaped-fork-3']) expect(await stepStarts(f.tdb.sql, id, 0)).toBe(0);
    await waitFor('the dead-letter message of reaped', async () => received.some((m) => m.rootWorkflowId === 'reaped'));
    expect(published.filter((r) => r === 'reaped')).toEqual(['reaped']);
  });

  withEmulator(
    'the real reaper, a second reaper racing past its lease and the app helper still make forks 1–3, three ledger rows and exactly one dead letter',
    async () => {
      await enqueue(f.client, 'alwaysDivergentWorkflow', 'race', 'v1');
      // Reaper 1: real invocations back to back. Reaper 2: the tick of a reaper whose lease was taken over.
      let stop = false;
      const second = (async () => {
        const state: ReaperState = {};
        for (let tick = 1; !stop; tick++) {
          const r = await reaperTick(rt2, state, tick);
          expect(r.diverged).not.toHaveProperty('error');
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      })();
      const forksFollowed: string[] = [];
      const helper = getResultWithAutoFork(f.client, 'race', { maxForks: 3, onFork: (f) => forksFollowed.push(f.to) }).then(
        () => undefined,
        (err: unknown) => err,
      );
      let err: unknown;
      try {
        const reaped = reapUntil(rt, 'the dead letter of race', async () => (await deadLetters('race')).some((d) => d.published));
        err = await helper;
        await reaped;
      } finally {
        stop = true;
        await second;
      }
      expect(err).toBeInstanceOf(ForkBudgetExhaustedError);
      expect(err).toMatchObject({ rootWorkflowId: 'race', forks: 3, workflowId: 'race-fork-3' });
      expect(forksFollowed).toEqual(['race-fork-1', 'race-fork-2', 'race-fork-3']);
      const lineage = await f.tdb.sql.query<{ workflow_uuid: string; forked_from: string }>(
        `SELECT workflow_uuid, forked_from FROM dbos.workflow_status WHERE workflow_uuid LIKE 'race%' AND forked_from IS NOT NULL ORDER BY 1`,
      );
      expect(lineage.rows).toEqual([
        { workflow_uuid: 'race-fork-1', forked_from: 'race' },
        { workflow_uuid: 'race-fork-2', forked_from: 'race-fork-1' },
        { workflow_uuid: 'race-fork-3', forked_from: 'race-fork-2' },
      ]);
      // Whoever made each fork (a reaper, with its row first, or the helper, reconciled by a reaper): one row each.
      expect(await ledgerOf(f.tdb.sql, 'race')).toEqual(
        [1, 2, 3].map((n) => ({
          n,
          source: n === 1 ? 'race' : `race-fork-${n - 1}`,
          fork: `race-fork-${n}`,
          from_step: 1,
          reason: 'diverged',
          child_fork_id: null,
        })),
      );
      expect(await deadLetters('race')).toEqual([{ workflow_id: 'race-fork-3', forks: 3, published: true }]);
      await waitFor('the dead-letter message of race', async () => received.some((m) => m.rootWorkflowId === 'race'));
      expect(published.filter((r) => r === 'race')).toEqual(['race']);
      expect(received.filter((m) => m.rootWorkflowId === 'race')).toHaveLength(1);
    },
  );

  it('ledger: forks the app helper made on its own are recorded by the reaper (three rows), which dead-letters the lineage once', async () => {
    await enqueue(f.client, 'alwaysDivergentWorkflow', 'solo', 'v1');
    const err = await getResultWithAutoFork(f.client, 'solo', { maxForks: 3 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ name: 'ForkBudgetExhaustedError', rootWorkflowId: 'solo', forks: 3 });
    // The helper has only a DBOSClient: nothing of afterlife's is written yet.
    expect(await ledgerOf(f.tdb.sql, 'solo')).toEqual([]);
    await waitStatus(f.tdb.sql, 'solo-fork-3', 'ERROR');
    const s = await reap(rt);
    expect(s.errors).toEqual([]);
    expect(await ledgerOf(f.tdb.sql, 'solo')).toEqual(
      [1, 2, 3].map((n) => ({
        n,
        source: n === 1 ? 'solo' : `solo-fork-${n - 1}`,
        fork: `solo-fork-${n}`,
        from_step: 1,
        reason: 'diverged',
        child_fork_id: null,
      })),
    );
    const by = await f.tdb.sql.query(`SELECT DISTINCT forked_by FROM afterlife.forks WHERE root_workflow_id = 'solo'`);
    expect(by.rows).toEqual([{ forked_by: RECONCILED_BY }]);
    expect(await deadLetters('solo')).toEqual([{ workflow_id: 'solo-fork-3', forks: 3, published: Boolean(emulatorHost) }]);
    expect(await forksOf(f.tdb.sql, 'solo-fork-3')).toEqual([]);
    // Reconciling again writes nothing more.
    await reap(rt);
    expect(await ledgerOf(f.tdb.sql, 'solo')).toHaveLength(3);
  });

  it('ledger: a fork the helper made that ended well (no diverged workflow leads to it) is recorded from the recent forks', async () => {
    // Only the first child (DBOS names it `<parent>-1`) meets another execution's checkpoint.
    await f.tdb.sql.query(
      `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms)
       VALUES ('ok-1', 1, 'stale-execution-step', 1, 1)`,
    );
    await enqueue(f.client, 'parentWorkflow', 'ok', 'v1', { key: 'ok', lastStepMs: 0 });
    expect(await getResultWithAutoFork<string[]>(f.client, 'ok')).toEqual([
      'prepare@exec-1',
      'plan@exec-1',
      'tool-a@exec-1',
      'answer@exec-1',
      'summarize@exec-1',
    ]);
    expect(await ledgerOf(f.tdb.sql, 'ok')).toEqual([]);
    const s = await reap(rt);
    expect(s.passes.diverged).toMatchObject({ errors: 0 });
    expect(await ledgerOf(f.tdb.sql, 'ok')).toEqual([
      { n: 1, source: 'ok', fork: 'ok-fork-1', from_step: 1, reason: 'child-diverged', child_fork_id: null },
    ]);
  });

  it('ledger: a fresh child the helper forked for a parent, diverging again, is left to its parent (never a second lineage)', async () => {
    // The app named the child, so each parent fork starts a fresh child `<fork>-child-1`, forked from the
    // previous one. A checkpoint another execution recorded at function_id 1 (as alwaysDivergentWorkflow
    // does itself) makes the original child and the first fresh child diverge; the second runs clean.
    for (const id of ['px-child', 'px-fork-1-child-1']) {
      await f.tdb.sql.query(
        `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms)
         VALUES ($1, 1, 'stale-execution-step', 1, 1)`,
        [id],
      );
    }
    await enqueue(f.client, 'parentWorkflow', 'px', 'v1', { key: 'px', lastStepMs: 0, childId: 'px-child' });
    // The app's helper gives up after one fork (or its process dies): the reaper carries the lineage on.
    const err = await getResultWithAutoFork(f.client, 'px', { maxForks: 1 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ name: 'ForkBudgetExhaustedError', rootWorkflowId: 'px', forks: 1 });
    await waitStatus(f.tdb.sql, 'px-fork-1-child-1', 'ERROR');
    await waitStatus(f.tdb.sql, 'px-fork-1', 'ERROR');
    expect((await reap(rt)).errors).toEqual([]);
    await waitStatus(f.tdb.sql, 'px-fork-2', 'SUCCESS');
    // Only the parent's lineage moved on; the diverged fresh child was not forked as a lineage of its own.
    expect((await allForks(f.tdb.sql)).filter((f) => f.startsWith('px'))).toEqual([
      'px-fork-1 <- px',
      'px-fork-1-child-1 <- px-child',
      'px-fork-2 <- px-fork-1',
      'px-fork-2-child-1 <- px-fork-1-child-1',
    ]);
    expect(await ledgerOf(f.tdb.sql, 'px')).toEqual([
      { n: 1, source: 'px', fork: 'px-fork-1', from_step: 2, reason: 'child-diverged', child_fork_id: 'px-fork-1-child-1' },
      { n: 2, source: 'px-fork-1', fork: 'px-fork-2', from_step: 2, reason: 'child-diverged', child_fork_id: 'px-fork-2-child-1' },
    ]);
    expect(await f.tdb.sql.query(`SELECT 1 FROM afterlife.forks WHERE root_workflow_id = 'px-child'`)).toMatchObject({ rowCount: 0 });
  });

  it('a parent whose child diverges every time: parent forks 1, 2, 3 by the reaper, then one dead letter keyed on the parent’s root', async () => {
    // Every child the lineage starts (DBOS names it `<parent>-1`) meets a checkpoint another execution recorded.
    for (const id of ['pb-1', 'pb-fork-1-1', 'pb-fork-2-1', 'pb-fork-3-1']) {
      await f.tdb.sql.query(
        `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms)
         VALUES ($1, 1, 'stale-execution-step', 1, 1)`,
        [id],
      );
    }
    await enqueue(f.client, 'parentWorkflow', 'pb', 'v1', { key: 'pb', lastStepMs: 0 });
    await waitStatus(f.tdb.sql, 'pb', 'ERROR');
    await reapUntil(rt, 'the dead letter of pb', async () => (await deadLetters('pb')).length > 0);
    expect((await allForks(f.tdb.sql)).filter((f) => f.startsWith('pb'))).toEqual([
      'pb-fork-1 <- pb',
      'pb-fork-2 <- pb-fork-1',
      'pb-fork-3 <- pb-fork-2',
    ]);
    for (const id of ['pb-fork-1-1', 'pb-fork-2-1', 'pb-fork-3-1'])
      expect(await f.client.getWorkflow(id)).toMatchObject({ status: 'ERROR', parentWorkflowID: id.slice(0, -2) });
    expect(await ledgerOf(f.tdb.sql, 'pb')).toEqual(
      [1, 2, 3].map((n) => ({
        n,
        source: n === 1 ? 'pb' : `pb-fork-${n - 1}`,
        fork: `pb-fork-${n}`,
        from_step: 1,
        reason: 'child-diverged',
        child_fork_id: null,
      })),
    );
    // One dead letter, on the parent's root: none for a child, none for a lineage of a child.
    const dl = await f.tdb.sql.query(
      `SELECT root_workflow_id, workflow_id, forks FROM afterlife.dead_letters WHERE root_workflow_id LIKE 'pb%'`,
    );
    expect(dl.rows).toEqual([{ root_workflow_id: 'pb', workflow_id: 'pb-fork-3', forks: 3 }]);
    expect(await forksOf(f.tdb.sql, 'pb-fork-3')).toEqual([]);
    // The parent's first step ran once in the whole lineage.
    for (const id of ['pb-fork-1', 'pb-fork-2', 'pb-fork-3']) expect(await stepStarts(f.tdb.sql, id, 0)).toBe(0);
    if (emulatorHost) {
      await waitFor('the dead-letter message of pb', async () => received.some((m) => m.rootWorkflowId === 'pb'));
      expect(published.filter((r) => r === 'pb')).toEqual(['pb']);
    }
  });

  /** Five concurrent calls, released together by a barrier at the fork point, so the race is real. */
  async function fiveAtOnce(
    deps: RepairDeps,
    faults: FaultInjector,
    id: string,
    release: (settled: () => number, hits: () => number) => boolean,
  ) {
    let settled = 0;
    faults.on('fork.beforeFork', () =>
      waitFor(
        'the barrier',
        async () =>
          release(
            () => settled,
            () => faults.hits.filter((h) => h.point === 'fork.beforeFork').length,
          ),
        {
          timeoutMs: 20_000,
          intervalMs: 20,
        },
      ).then(() => undefined),
    );
    return Promise.all(
      Array.from({ length: 5 }, () =>
        autoFork(deps, id).finally(() => {
          settled += 1;
        }),
      ),
    );
  }

  it('five concurrent autoFork calls make one fork (with the Redis lock: the others are told it is in hand)', async () => {
    await enqueue(f.client, 'alwaysDivergentWorkflow', 'five', 'v1');
    await waitStatus(f.tdb.sql, 'five', 'ERROR');
    const faults = new FaultInjector();
    // The lock holder waits at the fork point until the four others have returned.
    const results = await fiveAtOnce(repairDepsFromRuntime(rt, { faults }), faults, 'five', (settled) => settled() >= 4);
    expect(results.filter((r) => r.outcome === 'forked')).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'busy')).toHaveLength(4);
    expect(await forksOf(f.tdb.sql, 'five')).toEqual(['five-fork-1']);
  });

  it('five concurrent autoFork calls make one fork without Redis too (the primary key fences)', async () => {
    await enqueue(f.client, 'alwaysDivergentWorkflow', 'five-nolock', 'v1');
    await waitStatus(f.tdb.sql, 'five-nolock', 'ERROR');
    const faults = new FaultInjector();
    // All five reach the fork point before any of them forks.
    const results = await fiveAtOnce(
      repairDepsFromRuntime(rt, { faults, lock: undefined }),
      faults,
      'five-nolock',
      (_s, hits) => hits() >= 5,
    );
    expect(results.filter((r) => r.outcome === 'forked')).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'already-forked')).toHaveLength(4);
    expect(new Set(results.map((r) => ('newWorkflowId' in r ? r.newWorkflowId : r.outcome)))).toEqual(new Set(['five-nolock-fork-1']));
    expect(await forksOf(f.tdb.sql, 'five-nolock')).toEqual(['five-nolock-fork-1']);
    const ledger = await f.tdb.sql.query(`SELECT count(*)::int AS n FROM afterlife.forks WHERE root_workflow_id = 'five-nolock'`);
    expect(ledger.rows[0]).toEqual({ n: 1 });
  });

  // Last: it starts a v2 executor, which makes v2 the latest version for every test after it.
  it('FORK_TARGET_VERSION: `latest` forks onto the newest version (run by its executor), `original` onto the diverged workflow’s own', async () => {
    await enqueue(f.client, 'alwaysDivergentWorkflow', 'tv-latest', 'v1');
    await enqueue(f.client, 'alwaysDivergentWorkflow', 'tv-original', 'v1');
    await waitStatus(f.tdb.sql, 'tv-latest', 'ERROR');
    await waitStatus(f.tdb.sql, 'tv-original', 'ERROR');
    await startForkExecutor(f, 'exec-v2', 'v2');
    expect((await f.client.getLatestApplicationVersion()).versionName).toBe('v2');
    const original = testRuntime({
      databaseUrl: f.tdb.url,
      applicationName: f.app,
      env: { FORK_TARGET_VERSION: 'original', REPAIR_MODE: 'fork' },
    });
    try {
      expect(original.config.repair.targetVersion).toBe('original');
      expect(await autoFork(repairDepsFromRuntime(original), 'tv-original')).toMatchObject({
        outcome: 'forked',
        newWorkflowId: 'tv-original-fork-1',
      });
    } finally {
      await original.close();
    }
    expect(rt.config.repair.targetVersion).toBe('latest');
    expect(await autoFork(repairDepsFromRuntime(rt), 'tv-latest')).toMatchObject({ outcome: 'forked', newWorkflowId: 'tv-latest-fork-1' });
    // Each fork diverges again, but only after an executor of its version claimed and ran it.
    await waitStatus(f.tdb.sql, 'tv-original-fork-1', 'ERROR');
    await waitStatus(f.tdb.sql, 'tv-latest-fork-1', 'ERROR');
    expect(await f.client.getWorkflow('tv-original-fork-1')).toMatchObject({ applicationVersion: 'v1', executorId: 'exec-1' });
    expect(await f.client.getWorkflow('tv-latest-fork-1')).toMatchObject({ applicationVersion: 'v2', executorId: 'exec-v2' });
    const versions = await f.tdb.sql.query(
      `SELECT new_workflow_id, application_version FROM afterlife.forks WHERE root_workflow_id LIKE 'tv-%' ORDER BY 1`,
    );
    expect(versions.rows).toEqual([
      { new_workflow_id: 'tv-latest-fork-1', application_version: 'v2' },
      { new_workflow_id: 'tv-original-fork-1', application_version: 'v1' },
    ]);
  });
});
