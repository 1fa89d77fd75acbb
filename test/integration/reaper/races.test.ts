import { beforeAll, describe, expect, it } from 'vitest';
import { useRuntime } from '../../../functions/runtime.js';
import '../../../functions/index.js';
import { readLease, tryAcquireLease } from '../../../shared/db/queries/leases.js';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { leaseName, runReaper, type ReaperSummary } from '../../../shared/reaper/index.js';
import { FaultInjector, noFaults } from '../../../packages/executor/src/testing/faults.js';
import { beat } from '../../helpers/agents.js';
import { serve } from '../../helpers/cloudEvents.js';
import { type TestDatabase, waitFor, workflowRows } from '../../helpers/db.js';
import { backdateSentinel, reaperFixture, testReaperDeps } from '../../helpers/reaper.js';
import type { testRuntime } from '../../helpers/runtime.js';

/**
 * Races through fault points, a single flight, stuck workflows on a live executor and the dry run, against
 * real DBOS executors: `exec-live` keeps beating; `exec-dead` beat, owned workflows and was
 * SIGKILLed. Time is simulated by backdating rows (observations, claim times), never by sleeping.
 */
describe('reaper: races, lease, stuck workflows and dry run', () => {
  const faults = new FaultInjector();
  const fx = reaperFixture('app-reap', { faults, env: { STUCK_AFTER_MS: '60000' } });
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;
  let app: string;
  const deadIds = ['dead-wf-1', 'dead-wf-2'];
  const stuckIds = ['stuck-1', 'stuck-2'];

  const completed = (s: ReaperSummary) => {
    if (s.outcome !== 'completed') throw new Error(`reaper skipped: ${s.reason}`);
    return s;
  };
  const tick = (o: { dryRun?: boolean; policy?: 'report' | 'cancel-and-fork' } = {}) =>
    runReaper(testReaperDeps(rt, o.policy ? { config: { ...rt.config, reaper: { ...rt.config.reaper, stuckPolicy: o.policy } } } : {}), {
      maxTicks: 1,
      ...(o.dryRun ? { dryRun: true } : {}),
    }).then(completed);

  /**
   * The dead executor's lock has been free and its key gone for 10 s, seen on one tick (and Redis has kept
   * its keys for an hour): the next tick is the second observation of both witnesses.
   */
  const makeAbsent = async (executorId: string) => {
    await backdateSentinel(rt);
    await tdb.sql.query(
      `INSERT INTO afterlife.executor_observations AS o
         (application_name, executor_id, last_beat_seen_at, evidence, first_absent_at, last_absent_at, absent_ticks)
       VALUES ($1, $2, now() - interval '15 s', 'liveness', now() - interval '10 s', now(), 1)
       ON CONFLICT (application_name, executor_id) DO UPDATE
          SET evidence = 'liveness', first_absent_at = now() - interval '10 s', last_absent_at = now(),
              absent_ticks = 1, declared_dead_at = NULL`,
      [app, executorId],
    );
  };
  /** Claimed two hours ago, no checkpoint since: quiet for longer than STUCK_AFTER_MS (1 min here). */
  const backdateStuck = (ids: string[]) =>
    tdb.sql.query(
      `UPDATE dbos.workflow_status SET started_at_epoch_ms = started_at_epoch_ms - 7200000, updated_at = updated_at - 7200000
        WHERE workflow_uuid = ANY($1)`,
      [ids],
    );
  const snapshot = async () => {
    const q = async (sql: string) => JSON.stringify((await tdb.sql.query(sql)).rows);
    return {
      workflows: await q(`SELECT * FROM dbos.workflow_status ORDER BY workflow_uuid`),
      steps: await q(`SELECT workflow_uuid, function_id, function_name, output FROM dbos.operation_outputs ORDER BY 1, 2`),
      executors: await q(`SELECT * FROM afterlife.executors ORDER BY executor_id`),
      recoveries: await q(`SELECT * FROM afterlife.recoveries ORDER BY id`),
      stuck: await q(`SELECT * FROM afterlife.stuck_workflows ORDER BY workflow_uuid`),
    };
  };

  beforeAll(async () => {
    ({ tdb, rt, app } = fx);
    await fx.executor('exec-live', { beat: true });
    // Workflows whose function no executor has: the live executor claims them and they never progress.
    // Enqueued before exec-dead starts, so exec-live is the only one polling the internal queue.
    for (const id of stuckIds) {
      await tdb.sql.query(
        `SELECT dbos.enqueue_workflow(workflow_name => 'noSuchWorkflow', queue_name => '_dbos_internal_queue',
                                      workflow_id => $1, app_version => 'v1', application_name => $2)`,
        [id, app],
      );
    }
    await waitFor('stuck workflows claimed by exec-live', async () =>
      (await workflowRows(tdb.sql, stuckIds)).every((r) => r.status === 'PENDING' && r.executor_id === 'exec-live'),
    );
    const dead = await fx.executor('exec-dead', { beat: true });
    for (const id of deadIds) await dead.start(id, { steps: 2, stepMs: 60_000 });
    await waitFor('exec-dead runs its workflows', async () =>
      (await workflowRows(tdb.sql, deadIds)).every((r) => r.status === 'PENDING' && r.executor_id === 'exec-dead'),
    );
    // One tick while both beat: the reaper learns they have the kit.
    const first = await tick();
    expect(first.passes.dead.alive).toBe(2);
    dead.kill('SIGKILL');
    await dead.exited;
    // The key's TTL lapsing, without waiting for it.
    await rt.redis?.del(heartbeatKey(app, 'exec-dead'));
  });

  it('a dry run lists what it would do and changes nothing (also through the served function)', async () => {
    await makeAbsent('exec-dead');
    await backdateStuck(stuckIds);
    const before = await snapshot();
    const s = await tick({ dryRun: true, policy: 'cancel-and-fork' });
    expect(s.planned).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ pass: 'dead', action: 'recover-inline', executorId: 'exec-dead' }),
        expect.objectContaining({ pass: 'stuck', action: 'report', workflowId: 'stuck-1' }),
        expect.objectContaining({ pass: 'stuck', action: 'cancel', workflowId: 'stuck-2' }),
      ]),
    );
    expect(await snapshot()).toEqual(before);

    useRuntime(rt);
    const server = await serve('reaper');
    try {
      await makeAbsent('exec-dead');
      const res = await fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ dryRun: true, maxTicks: 1 }),
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as ReaperSummary;
      expect(body.outcome).toBe('completed');
      expect(body.dryRun).toBe(true);
      expect(await snapshot()).toEqual(before);
      expect((await fetch(server.url, { method: 'GET' })).status).toBe(405);
      const bad = await fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ dryRun: 'yes' }),
      });
      expect(bad.status).toBe(400);
      expect(JSON.stringify(await bad.json())).toContain('dryRun');
    } finally {
      await server.close();
    }
    // Fresh again, so the next tests decide when they become stuck.
    await tdb.sql.query(
      `UPDATE dbos.workflow_status SET started_at_epoch_ms = ${'(EXTRACT(EPOCH FROM now())*1000)::bigint'} WHERE workflow_uuid = ANY($1)`,
      [stuckIds],
    );
  });

  it('a heartbeat reappearing between detection and recovery leaves the executor alone; without it, it is recovered', async () => {
    await makeAbsent('exec-dead');
    faults.on('reaper.beforeDeclareDead', async (ctx) => {
      // As the kit writes it: a garbage value is no evidence of life (issue 23).
      await beat(rt.redis!, app, String(ctx.executorId), 'v1', 3_000);
    });
    const raced = await tick();
    faults.off('reaper.beforeDeclareDead');
    expect(raced.passes.dead.reappeared).toBe(1);
    expect(raced.declaredDead).toEqual([]);
    expect((await workflowRows(tdb.sql, deadIds)).map((r) => [r.status, r.executor_id])).toEqual([
      ['PENDING', 'exec-dead'],
      ['PENDING', 'exec-dead'],
    ]);

    // The same situation with a fault point that writes nothing: the stale executor is handled.
    await rt.redis?.del(heartbeatKey(app, 'exec-dead'));
    await makeAbsent('exec-dead');
    faults.on('reaper.beforeDeclareDead', () => undefined);
    const handled = await tick();
    faults.off('reaper.beforeDeclareDead');
    expect(handled.declaredDead).toEqual(['exec-dead']);
    expect(handled.passes.dead.recoveredInline).toBe(1);
    expect(handled.passes.dead.reenqueued).toBe(2);
    await waitFor('exec-live claims the dead executor’s workflows', async () =>
      (await workflowRows(tdb.sql, deadIds)).every((r) => r.status === 'PENDING' && r.executor_id === 'exec-live'),
    );
    // Declared once: the next tick does not declare it again.
    const again = await tick();
    expect(again.declaredDead).toEqual([]);
  });

  it('a workflow claimed by an executor without its function is reported once quiet for STUCK_AFTER', async () => {
    const fresh = await tick({ policy: 'report' });
    expect(fresh.passes.stuck.found).toBe(0);
    await backdateStuck(stuckIds);
    const s = await tick({ policy: 'report' });
    expect(s.stuckWorkflows.sort()).toEqual(stuckIds);
    const report = await tdb.sql.query(`SELECT workflow_uuid, executor_id, action FROM afterlife.stuck_workflows ORDER BY 1`);
    expect(report.rows).toEqual(stuckIds.map((id) => ({ workflow_uuid: id, executor_id: 'exec-live', action: 'reported' })));
    expect(rt.logger.lines.some((l) => l.event === 'stuck_workflow' && l.workflowId === 'stuck-1')).toBe(true);
    expect((await workflowRows(tdb.sql, stuckIds)).every((r) => r.status === 'PENDING')).toBe(true);
  });

  it('with cancel-and-fork, a checkpoint landing between SELECT and UPDATE leaves the row; a quiet one is cancelled', async () => {
    faults.on('reaper.beforeCancelStuck', async (ctx) => {
      if (ctx.workflowId !== 'stuck-1') return; // stuck-2: the fault point writes nothing
      await tdb.sql.query(
        `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms)
         VALUES ('stuck-1', 0, 'late-step', (EXTRACT(EPOCH FROM now())*1000)::bigint, (EXTRACT(EPOCH FROM now())*1000)::bigint)`,
      );
    });
    const s = await tick({ policy: 'cancel-and-fork' });
    faults.off('reaper.beforeCancelStuck');
    expect(s.passes.stuck.raced).toBe(1);
    expect(s.passes.stuck.cancelled).toBe(1);
    expect(s.passes.stuck.forked).toBe(1);
    const rows = await workflowRows(tdb.sql, stuckIds);
    expect(rows.map((r) => [r.workflow_uuid, r.status, r.executor_id])).toEqual([
      ['stuck-1', 'PENDING', 'exec-live'],
      ['stuck-2', 'CANCELLED', 'exec-live'],
    ]);
    const report = await tdb.sql.query(`SELECT workflow_uuid, action FROM afterlife.stuck_workflows ORDER BY 1`);
    expect(report.rows).toEqual([
      { workflow_uuid: 'stuck-1', action: 'reported' },
      { workflow_uuid: 'stuck-2', action: 'forked' },
    ]);
    // The cancelled workflow's lineage goes on under its deterministic fork ID, recorded in the ledger.
    const fork = await tdb.sql.query(`SELECT workflow_uuid, forked_from FROM dbos.workflow_status WHERE forked_from = 'stuck-2'`);
    expect(fork.rows).toEqual([{ workflow_uuid: 'stuck-2-fork-1', forked_from: 'stuck-2' }]);
    const ledger = await tdb.sql.query(`SELECT new_workflow_id, reason FROM afterlife.forks WHERE root_workflow_id = 'stuck-2'`);
    expect(ledger.rows).toEqual([{ new_workflow_id: 'stuck-2-fork-1', reason: 'stuck' }]);
    // A second tick does not fork it again: it is no longer PENDING, and the ID is taken.
    const again = await tick({ policy: 'cancel-and-fork' });
    expect(again.passes.stuck.forked).toBe(0);
  });

  it('diverged workflows that ended since the last scan are handed to the fork function, once each', async () => {
    // A top-level workflow that ended in replay divergence, as DBOS records it (workflow_output.error).
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, completed_at)
       VALUES ('diverged-1', 'ERROR', 'agentWorkflow', 'exec-live', 'v1', $1, (EXTRACT(EPOCH FROM now())*1000)::bigint)`,
      [app],
    );
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_output (workflow_uuid, error) VALUES ('diverged-1',
         '{"json":{"dbosErrorCode":26,"workflowID":"diverged-1","stepID":1,"expectedName":"step-2","name":"Error","message":"During execution of workflow diverged-1 step 1, function step-1 was recorded when step-2 was expected. Check that your workflow is deterministic."},"__dbos_serializer":"superjson"}')`,
    );
    const dry = await tick({ dryRun: true });
    expect(dry.planned).toEqual(
      expect.arrayContaining([expect.objectContaining({ pass: 'diverged', action: 'fork', workflowId: 'diverged-1' })]),
    );
    const handed: string[] = [];
    const s = await runReaper(testReaperDeps(rt, { repairDiverged: async (id) => void handed.push(id) }), { maxTicks: 2 });
    expect(s.outcome === 'completed' && s.passes.diverged.handed).toBe(1);
    // The second tick looked only since the first: not handed again.
    expect(handed).toEqual(['diverged-1']);
  });

  it('two reapers at once — one holds the lease, the other is skipped; a dead holder’s lease expires', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    faults.on('reaper.tick', async () => {
      entered();
      await held;
    });
    const first = runReaper(testReaperDeps(rt), { maxTicks: 1 });
    await inside;
    faults.off('reaper.tick');
    const second = await runReaper(testReaperDeps(rt, { faults: noFaults }), { maxTicks: 1 });
    expect(second.outcome).toBe('skipped');
    release();
    expect((await first).outcome).toBe('completed');
    // Released at the end: the next invocation runs at once.
    expect((await runReaper(testReaperDeps(rt), { maxTicks: 1 })).outcome).toBe('completed');

    // A holder that died mid-invocation never releases: skipped until the lease expires.
    const name = leaseName(app);
    expect(await tryAcquireLease(rt.db, name, 'crashed-reaper', 90_000)).toBe(true);
    expect((await runReaper(testReaperDeps(rt), { maxTicks: 1 })).outcome).toBe('skipped');
    await tdb.sql.query(`UPDATE afterlife.leases SET expires_at = now() - interval '1 s' WHERE name = $1`, [name]);
    const later = await runReaper(testReaperDeps(rt), { maxTicks: 1 });
    expect(later.outcome).toBe('completed');
    expect((await readLease(rt.db, name))?.holder).toBeNull();
  });
});
