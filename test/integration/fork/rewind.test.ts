import { describe, expect, it } from 'vitest';
import { repairDepsFromRuntime } from '../../../shared/repair/deps.js';
import { getResultWithRepair, readStreamWithRepair } from '../../../packages/executor/src/repair/index.js';
import type { RepairDeps } from '../../../shared/repair/primitives/deps.js';
import { repairDiverged } from '../../../shared/repair/situations/diverged.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { waitFor } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';
import {
  allForks,
  divergeOnB,
  enqueue,
  hasCheckpoint,
  reap,
  reaperTick,
  reapUntil,
  stepStarts,
  waitStatus,
  startForkExecutor,
} from './helpers.js';
import { repairFixture } from '../../helpers/repair.js';

/**
 * Repair in place with real executors: A runs the example app's divergent workflows, records step 1 and
 * is SIGKILLed during step 2; the choice row is flipped; B (same version) recovers them and the replays
 * diverge at function_id 1. afterlife rewinds them under their own IDs (REPAIR_MODE's default).
 */
describe('repair by rewind of real replay divergence', () => {
  let deps: RepairDeps;
  const faults = new FaultInjector();
  const spec = (key: string) => ({ key, lastStepMs: 3_000 });
  const diverged = ['wf-r', 'wf-race', 'wf-crash', 'wf-reaper', 'parent-r', 'wf-stream'];
  // Consumers of wf-stream's token stream, started before the divergence.
  let repairAware: Promise<string[]>;
  let plain: Promise<string[]>;
  const collect = async (it: AsyncIterable<string>) => {
    const out: string[] = [];
    for await (const v of it) out.push(v);
    return out;
  };

  const rewindRows = async (id: string) =>
    (
      await f.tdb.sql.query(
        `SELECT root_workflow_id AS root, n, from_step, reason, rewound_at IS NOT NULL AS done FROM afterlife.rewinds WHERE workflow_id = $1 ORDER BY n`,
        [id],
      )
    ).rows;

  const f = repairFixture('app-rewind', {
    faults,
    setupTimeoutMs: 120_000,
    setup: async ({ tdb, rt, client, app, executors }) => {
      deps = repairDepsFromRuntime(rt);
      const a = await startForkExecutor({ tdb, app, executors }, 'exec-A');
      for (const id of diverged.filter((x) => x.startsWith('wf-') && x !== 'wf-stream'))
        await enqueue(client, 'divergentWorkflow', id, 'v1', spec(id));
      await enqueue(client, 'streamingDivergentWorkflow', 'wf-stream', 'v1', spec('wf-stream'));
      repairAware = collect(readStreamWithRepair<string>(client, 'wf-stream', 'tokens', { pollMs: 200, repairTimeoutMs: 90_000 }));
      plain = collect(client.readStream<string>('wf-stream', 'tokens'));
      // Awaited by their test; handled here too, so a run filtered to other tests does not report them.
      for (const p of [repairAware, plain]) p.catch(() => undefined);
      await enqueue(client, 'parentWorkflow', 'parent-r', 'v1', spec('parent-r'));
      await waitFor(
        'tool steps checkpointed on A',
        async () =>
          (await Promise.all(['wf-r', 'wf-race', 'wf-crash', 'wf-reaper', 'parent-r-1'].map((id) => hasCheckpoint(tdb.sql, id, 1)))).every(
            Boolean,
          ) &&
          // wf-stream: plan (0), its token (1), the tool (2), its token (3); the answer (4) is in flight.
          (await hasCheckpoint(tdb.sql, 'wf-stream', 3)),
      );
      executors.push(
        await divergeOnB(rt, a, {
          databaseUrl: tdb.url,
          applicationName: app,
          choices: diverged,
          waitError: [...diverged, 'parent-r-1'],
          sql: tdb.sql,
        }),
      );
    },
  });

  it('rewinds a diverged workflow once from its divergent step: SUCCESS under its own ID, step 0 not re-run', async () => {
    const res = await repairDiverged(deps, 'wf-r');
    expect(res).toMatchObject({
      outcome: 'rewound',
      workflowId: 'wf-r',
      root: 'wf-r',
      n: 1,
      startStep: 1,
      reason: 'diverged',
      rewound: ['wf-r'],
    });
    // The same ID is re-enqueued on its own queue and runs again; a plain getResult on the ID gets the result.
    expect(await f.client.retrieveWorkflow<string[]>('wf-r').getResult()).toEqual(['plan@exec-A', 'tool-b@exec-B', 'answer@exec-B']);
    expect(await f.client.getWorkflow('wf-r')).toMatchObject({ status: 'SUCCESS', queueName: 'forktest', applicationVersion: 'v1' });
    expect(await stepStarts(f.tdb.sql, 'wf-r', 0)).toBe(1); // before the cut: never again
    expect(await stepStarts(f.tdb.sql, 'wf-r', 1)).toBe(2); // tool-a on A, then tool-b after the rewind (B's replay ran nothing)
    expect(await rewindRows('wf-r')).toEqual([{ root: 'wf-r', n: 1, from_step: 1, reason: 'diverged', done: true }]);
    // Asked again: nothing to repair, nothing rewound twice.
    expect(await repairDiverged(deps, 'wf-r')).toMatchObject({ outcome: 'skipped', why: 'not-diverged', status: 'SUCCESS' });
    expect(await stepStarts(f.tdb.sql, 'wf-r', 1)).toBe(2);
    expect(await allForks(f.tdb.sql)).toEqual([]);
  });

  it('a readStream consumer started before the divergence reads the repaired stream to its end', async () => {
    // DBOS's own reader stops when the writer ends in ERROR without closing the stream.
    expect(await plain).toEqual(['plan@exec-A', 'tool-a@exec-A']);
    expect(await repairDiverged(deps, 'wf-stream')).toMatchObject({ outcome: 'rewound', startStep: 2 });
    // The discarded run's token stays (a rewind removes only the close marker); the repaired run's follow, to the close.
    expect(await repairAware).toEqual(['plan@exec-A', 'tool-a@exec-A', 'tool-b@exec-B', 'answer@exec-B']);
    expect(await f.client.getWorkflow('wf-stream')).toMatchObject({ status: 'SUCCESS' });
    expect(await collect(f.client.readStream<string>('wf-stream', 'tokens'))).toEqual([
      'plan@exec-A',
      'tool-a@exec-A',
      'tool-b@exec-B',
      'answer@exec-B',
    ]);
  });

  it('two repairers racing without Redis rewind it once (the ledger claim and DBOS status re-check fence)', async () => {
    const [r1, r2] = [
      testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, redis: 'none' }),
      testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, redis: 'none' }),
    ];
    try {
      const results = await Promise.all([
        repairDiverged(repairDepsFromRuntime(r1), 'wf-race'),
        repairDiverged(repairDepsFromRuntime(r2), 'wf-race'),
      ]);
      const outcomes = results.map((r) => r.outcome).sort();
      expect(outcomes.filter((o) => o === 'rewound')).toHaveLength(1);
      expect(outcomes.every((o) => ['rewound', 'busy', 'already-rewound'].includes(o))).toBe(true);
    } finally {
      await Promise.all([r1.close(), r2.close()]);
    }
    await waitStatus(f.tdb.sql, 'wf-race', 'SUCCESS');
    expect(await stepStarts(f.tdb.sql, 'wf-race', 1)).toBe(2);
    expect(await stepStarts(f.tdb.sql, 'wf-race', 2)).toBe(2); // A's killed run, and one repaired run
    expect(await rewindRows('wf-race')).toHaveLength(1);
  });

  it('a repairer that dies after its ledger row leaves a claim the next pass takes over once it is stale', async () => {
    faults.onNth('rewind.beforeRewind', 1, () => {
      throw new Error('injected: repairer died after the ledger row');
    });
    await expect(repairDiverged(deps, 'wf-crash')).rejects.toThrow(/injected/);
    faults.off('rewind.beforeRewind');
    expect(await f.client.getWorkflow('wf-crash')).toMatchObject({ status: 'ERROR' });
    expect(await rewindRows('wf-crash')).toEqual([{ root: 'wf-crash', n: 1, from_step: 1, reason: 'diverged', done: false }]);
    // A fresh claim is someone's work in progress: left alone.
    expect(await repairDiverged(deps, 'wf-crash')).toMatchObject({ outcome: 'busy' });
    // Backdated past the claim window (instead of sleeping): taken over, and the rewind made under the same n.
    await f.tdb.sql.query(`UPDATE afterlife.rewinds SET claimed_at = now() - interval '1 hour' WHERE workflow_id = 'wf-crash'`);
    expect(await repairDiverged(deps, 'wf-crash')).toMatchObject({ outcome: 'rewound', n: 1 });
    await waitStatus(f.tdb.sql, 'wf-crash', 'SUCCESS');
    expect(await rewindRows('wf-crash')).toEqual([{ root: 'wf-crash', n: 1, from_step: 1, reason: 'diverged', done: true }]);
    expect(await stepStarts(f.tdb.sql, 'wf-crash', 0)).toBe(1);
  });

  it('parent whose child diverged: child rewound first, then the parent from its await; a caller blocked on getResultWithRepair gets the result', async () => {
    const caller = getResultWithRepair<string[]>(f.client, 'parent-r', { pollMs: 200, repairTimeoutMs: 60_000 });
    const rewinds: string[] = [];
    const res = await repairDiverged(deps, 'parent-r');
    expect(res).toMatchObject({ outcome: 'rewound', reason: 'child-diverged', startStep: 2, rewound: ['parent-r-1', 'parent-r'] });
    rewinds.push(...(res.outcome === 'rewound' ? res.rewound : []));
    expect(await caller).toEqual(['prepare@exec-A', 'plan@exec-A', 'tool-b@exec-B', 'answer@exec-B', 'summarize@exec-B']);
    expect(await f.client.getWorkflow('parent-r')).toMatchObject({ status: 'SUCCESS' });
    expect(await f.client.getWorkflow('parent-r-1')).toMatchObject({ status: 'SUCCESS', parentWorkflowID: 'parent-r' });
    // Nothing before either cut ran again; the child ran its new tool once.
    expect(await stepStarts(f.tdb.sql, 'parent-r', 0)).toBe(1);
    expect(await stepStarts(f.tdb.sql, 'parent-r-1', 0)).toBe(1);
    expect(await stepStarts(f.tdb.sql, 'parent-r-1', 1)).toBe(2);
    const row = await f.tdb.sql.query(`SELECT n, from_step, reason, descendants FROM afterlife.rewinds WHERE workflow_id = 'parent-r'`);
    expect(row.rows).toEqual([
      { n: 1, from_step: 2, reason: 'child-diverged', descendants: [expect.objectContaining({ workflowId: 'parent-r-1', fromStep: 1 })] },
    ]);
  });

  it('the real reaper (an invocation, and a second reaper ticking past its lease) rewinds by default, once, and forks nothing', async () => {
    const rt2 = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app });
    const [first, tick2] = await Promise.all([reap(f.rt), reaperTick(rt2, {})]).finally(() => rt2.close());
    expect(first.errors).toEqual([]);
    expect(tick2.diverged).not.toHaveProperty('error');
    await waitStatus(f.tdb.sql, 'wf-reaper', 'SUCCESS');
    expect(await rewindRows('wf-reaper')).toEqual([{ root: 'wf-reaper', n: 1, from_step: 1, reason: 'diverged', done: true }]);
    expect(await stepStarts(f.tdb.sql, 'wf-reaper', 1)).toBe(2); // A's tool-a and one repaired run's tool-b
    expect(await allForks(f.tdb.sql)).toEqual([]);
  });

  it('a workflow that diverges on every replay is rewound MAX_REPAIRS times, then dead-lettered once', async () => {
    await enqueue(f.client, 'alwaysDivergentWorkflow', 'always', 'v1');
    const seen: string[] = [];
    for (let n = 1; n <= 3; n++) {
      await waitFor(`always ended ERROR (${n})`, async () => {
        const s = await f.client.getWorkflow('always');
        return s?.status === 'ERROR' && !seen.includes(String(s.completedAt)) ? s : undefined;
      });
      seen.push(String((await f.client.getWorkflow('always'))?.completedAt));
      expect(await repairDiverged(deps, 'always')).toMatchObject({ outcome: 'rewound', n, startStep: 1 });
    }
    await waitFor('always ended ERROR after the 3rd rewind', async () => {
      const s = await f.client.getWorkflow('always');
      return s?.status === 'ERROR' && !seen.includes(String(s.completedAt)) ? s : undefined;
    });
    expect(await repairDiverged(deps, 'always')).toMatchObject({ outcome: 'dead-lettered', root: 'always', forks: 3 });
    expect(await repairDiverged(deps, 'always')).toMatchObject({ outcome: 'dead-lettered' });
    expect((await rewindRows('always')).map((r) => r.n)).toEqual([1, 2, 3]);
    const dl = await f.tdb.sql.query(`SELECT workflow_id, forks FROM afterlife.dead_letters WHERE root_workflow_id = 'always'`);
    expect(dl.rows).toEqual([{ workflow_id: 'always', forks: 3 }]);
    expect(await f.client.getWorkflow('always')).toMatchObject({ status: 'ERROR' });
    expect(await stepStarts(f.tdb.sql, 'always', 0)).toBe(1);
  });

  it(
    'the real reaper alone: rewinds a workflow diverging on every replay MAX_REPAIRS times, then one dead letter',
    { timeout: 120_000 },
    async () => {
      await enqueue(f.client, 'alwaysDivergentWorkflow', 'always-reaped', 'v1');
      await waitStatus(f.tdb.sql, 'always-reaped', 'ERROR');
      const deadLetter = async () =>
        (await f.tdb.sql.query(`SELECT workflow_id, forks FROM afterlife.dead_letters WHERE root_workflow_id = 'always-reaped'`)).rows;
      await reapUntil(f.rt, 'the dead letter of always-reaped', async () => (await deadLetter()).length > 0, 90_000);
      expect(await deadLetter()).toEqual([{ workflow_id: 'always-reaped', forks: 3 }]);
      expect((await rewindRows('always-reaped')).map((r) => [r.n, r.done])).toEqual([
        [1, true],
        [2, true],
        [3, true],
      ]);
      // More invocations change nothing: no fourth rewind, no second dead letter.
      await reap(f.rt);
      expect(await rewindRows('always-reaped')).toHaveLength(3);
      expect(await deadLetter()).toHaveLength(1);
      expect(await stepStarts(f.tdb.sql, 'always-reaped', 0)).toBe(1);
      expect(await allForks(f.tdb.sql)).toEqual([]);
    },
  );
});
