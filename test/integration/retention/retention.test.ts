import type { DBOSClient } from '@dbos-inc/dbos-sdk';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCK_BOUND_MS, OVER_BOUND_RETRIES } from '../../../shared/retention/batchSize.js';
import { type RetentionPassResult, runRetentionPass } from '../../../shared/retention/pass.js';
import { unlimitedBudget } from '../../../shared/lifecycle/deadline.js';
import { runTick } from '../../../shared/reaper/tick.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { RetentionOutput, StatusOutput } from '../../../cli/schemas.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { testRuntime } from '../../helpers/runtime.js';
import { dbosClient, statusOf, waitStatus } from '../fork/helpers.js';

/**
 * Retention and the global timeout against real DBOS executors (the example app, a child process): real
 * workflows in every state, their rows in every DBOS table, then backdated (never slept on) past the
 * thresholds. What must go goes with all its rows; what must stay stays; races are staged at the named
 * fault point between the batch's read and its delete, so the delete statement alone decides.
 */
const QUEUE = 'retq';
/** A queue no executor listens to: what is enqueued there stays ENQUEUED. */
const PARKED = 'parked';
const HOUR = 3_600_000;
const COMPLETED = `('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')`;
/** Every DBOS table that holds rows of a workflow, with the column that names it. */
const TABLES: Array<[string, string]> = [
  ['workflow_status', 'workflow_uuid'],
  ['operation_outputs', 'workflow_uuid'],
  ['workflow_input', 'workflow_uuid'],
  ['workflow_output', 'workflow_uuid'],
  ['workflow_events', 'workflow_uuid'],
  ['workflow_events_history', 'workflow_uuid'],
  ['streams', 'workflow_uuid'],
  ['notifications', 'destination_uuid'],
];

async function rowsOf(sql: pg.Pool, ids: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [t, col] of TABLES) {
    const r = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM dbos.${t} WHERE ${col} = ANY($1)`, [ids]);
    out[t] = r.rows[0]?.n ?? 0;
  }
  return out;
}

async function exists(sql: pg.Pool, ids: string[]): Promise<string[]> {
  const r = await sql.query<{ workflow_uuid: string }>(
    `SELECT workflow_uuid FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) ORDER BY 1`,
    [ids],
  );
  return r.rows.map((x) => x.workflow_uuid);
}

/** Moves completion (and creation) back: as if the workflows had completed `ms` ago. */
async function backdateCompletion(sql: pg.Pool, ids: string[], ms: number): Promise<void> {
  await sql.query(
    `UPDATE dbos.workflow_status SET completed_at = completed_at - $2::bigint, updated_at = updated_at - $2::bigint, created_at = created_at - $2::bigint
      WHERE workflow_uuid = ANY($1) AND status IN ${COMPLETED}`,
    [ids, ms],
  );
}

/** Seeds `n` completed workflows with steps, payloads and an event (set-based, as bench/retention.ts does). */
async function seedCompleted(sql: pg.Pool, app: string, prefix: string, n: number, agoMs: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  await sql.query(
    `WITH w AS (SELECT id, (EXTRACT(EPOCH FROM now()) * 1000)::bigint - $3::bigint AS at FROM unnest($1::text[]) id),
     s AS (INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, application_name, application_version,
             created_at, updated_at, completed_at, serialization)
           SELECT id, 'SUCCESS', 'agentWorkflow', '', '', $2, 'v1', at - 1000, at, at, 'js_superjson' FROM w RETURNING workflow_uuid),
     i AS (INSERT INTO dbos.workflow_input (workflow_uuid, inputs) SELECT workflow_uuid, '{"json":[1]}' FROM s RETURNING 1),
     o AS (INSERT INTO dbos.workflow_output (workflow_uuid, output) SELECT workflow_uuid, '{"json":2}' FROM s RETURNING 1),
     e AS (INSERT INTO dbos.workflow_events (workflow_uuid, key, value) SELECT workflow_uuid, 'k', 'v' FROM s RETURNING 1)
     INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, output)
     SELECT workflow_uuid, f, 'step-' || f, 'out' FROM s, generate_series(0, 2) f`,
    [ids, app, agoMs],
  );
  return ids;
}

describe('retention and the global timeout (real executors)', () => {
  let tdb: TestDatabase;
  let client: DBOSClient;
  let exec: ExecutorHandle;
  const app = uniqueName('app-ret');
  const rts: Array<{ close: () => Promise<void> }> = [];

  const enqueue = (workflowName: string, workflowID: string, queueName: string, ...args: unknown[]) =>
    client.enqueue({ queueName, workflowName, workflowID, appVersion: 'v1' }, ...args);
  const agent = (steps: number, stepMs: number) => ({ steps, stepMs });

  function retentionRuntime(env: Record<string, string>, faults?: FaultInjector) {
    const rt = testRuntime({ databaseUrl: tdb.url, applicationName: app, redis: 'none', env, ...(faults ? { faults } : {}) });
    rts.push(rt);
    return rt;
  }
  function pass(
    env: Record<string, string>,
    o: { dryRun?: boolean; faults?: FaultInjector; batchSize?: number } = {},
  ): Promise<RetentionPassResult> {
    const rt = retentionRuntime(env, o.faults);
    return runRetentionPass(rt, {
      budget: unlimitedBudget(),
      dryRun: o.dryRun ?? false,
      tuning: o.batchSize ? { batchSize: o.batchSize } : {},
    });
  }
  // An hour is below the age's floor (a day): staged data, so the override says the test means it.
  const byAge = { RETENTION_MAX_AGE_MS: String(HOUR), AFTERLIFE_ALLOW_BELOW_FLOOR: 'RETENTION_MAX_AGE_MS' };

  // Workflows that must go once backdated, and those that must stay.
  const gone = ['done-1', 'done-2', 'chatty-1', 'fail-1', 'cancel-1', 'div-settled'];
  const stay = ['recent-1', 'running-1', 'enq-1', 'delayed-1', 'famA', 'famA-1', 'famB', 'famB-1', 'famC', 'famC-1', 'div-1'];

  beforeAll(async () => {
    tdb = await createTestDatabase();
    client = await dbosClient(tdb.url, app);
    exec = await startExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      applicationVersion: 'v1',
      executorId: 'exec-R',
      queues: { [QUEUE]: {} },
    });

    await enqueue('agentWorkflow', 'done-1', QUEUE, agent(2, 1));
    await enqueue('agentWorkflow', 'done-2', QUEUE, agent(1, 1));
    await enqueue('chattyWorkflow', 'chatty-1', QUEUE, 'c1');
    await enqueue('failingWorkflow', 'fail-1', QUEUE);
    await enqueue('agentWorkflow', 'cancel-1', QUEUE, agent(1, 600_000));
    await enqueue('agentWorkflow', 'recent-1', QUEUE, agent(1, 1));
    await enqueue('agentWorkflow', 'running-1', QUEUE, agent(1, 600_000));
    await enqueue('agentWorkflow', 'enq-1', PARKED, agent(1, 1));
    await client.enqueue(
      { queueName: QUEUE, workflowName: 'agentWorkflow', workflowID: 'delayed-1', appVersion: 'v1', delaySeconds: 3_600 },
      agent(1, 1),
    );
    // famA: running parent, completed child. famB: completed parent, running child. famC: completed parent, ENQUEUED child.
    await enqueue('familyWorkflow', 'famA', QUEUE, { child: agent(1, 1), awaitChild: true, holdMs: 600_000 });
    await enqueue('familyWorkflow', 'famB', QUEUE, { child: agent(1, 600_000), awaitChild: false, holdMs: 0 });
    await enqueue('familyWorkflow', 'famC', QUEUE, { child: agent(1, 1), awaitChild: false, holdMs: 0, childQueue: PARKED });
    // Diverged (code 26) and not dealt with: a repair is about to act on it. The settled one was dead-lettered.
    await enqueue('alwaysDivergentWorkflow', 'div-1', QUEUE);
    await enqueue('alwaysDivergentWorkflow', 'div-settled', QUEUE);

    for (const id of ['done-1', 'done-2', 'chatty-1', 'recent-1', 'famA-1', 'famB', 'famC']) await waitStatus(tdb.sql, id, 'SUCCESS');
    for (const id of ['fail-1', 'div-1', 'div-settled']) await waitStatus(tdb.sql, id, 'ERROR');
    for (const id of ['running-1', 'cancel-1', 'famA', 'famB-1']) await waitStatus(tdb.sql, id, 'PENDING');
    await client.cancelWorkflow('cancel-1');
    await waitStatus(tdb.sql, 'cancel-1', 'CANCELLED');
    expect(await statusOf(tdb.sql, 'enq-1')).toBe('ENQUEUED');
    expect(await statusOf(tdb.sql, 'famC-1')).toBe('ENQUEUED');
    expect(await statusOf(tdb.sql, 'delayed-1')).toBe('DELAYED');
    // A message to chatty-1 (notifications), so every DBOS table holds a row of it.
    await client.send('chatty-1', 'hello', 'topic');
    await tdb.sql.query(
      `INSERT INTO afterlife.dead_letters (root_workflow_id, application_name, workflow_id, forks, reason, published_at)
       VALUES ('div-settled', $1, 'div-settled', 3, 'exhausted', now())`,
      [app],
    );
    await backdateCompletion(tdb.sql, [...gone, ...stay.filter((id) => id !== 'recent-1')], 2 * HOUR);
  }, 180_000);

  afterAll(async () => {
    await exec?.stop();
    await client?.destroy();
    for (const rt of rts) await rt.close();
    await tdb?.drop();
  });

  it('every DBOS table holds rows of the workflows about to go (the test can fail)', async () => {
    const rows = await rowsOf(tdb.sql, ['chatty-1']);
    for (const [table] of TABLES) expect(rows[table], table).toBeGreaterThan(0);
  });

  it('a dry run lists exactly the completed workflows past the threshold, and changes nothing', async () => {
    const r = await pass(byAge, { dryRun: true });
    expect([...(r.wouldDelete ?? [])].sort()).toEqual([...gone].sort());
    expect(await exists(tdb.sql, gone)).toEqual([...gone].sort());
    const cli = await runCli(['retention', '--dry-run', '--json'], { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app, ...byAge });
    const out = parseJson(cli, RetentionOutput);
    expect(out.dryRun).toBe(true);
    expect([...out.wouldDelete].sort()).toEqual([...gone].sort());
  });

  it('deletes only completed workflows past the threshold, with their rows in every DBOS table; the rest stays', async () => {
    const r = await pass(byAge);
    expect(r.deleted).toBe(gone.length);
    expect(r.roundFinished).toBe(true);
    expect(await exists(tdb.sql, gone)).toEqual([]);
    expect(await rowsOf(tdb.sql, gone)).toEqual(Object.fromEntries(TABLES.map(([t]) => [t, 0])));
    expect(await exists(tdb.sql, stay)).toEqual([...stay].sort());
    // What stays keeps its history.
    expect((await rowsOf(tdb.sql, ['famA-1'])).operation_outputs).toBeGreaterThan(0);
    // How long a batch holds its locks is measured by bench/retention.ts, not asserted on a shared machine.
    expect(r.batches).toBeGreaterThan(0);
  });

  it('`afterlife-plane status` shows the policy in force and the last pass', async () => {
    const run = await runCli(['status', '--json'], { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app, ...byAge });
    const s = parseJson(run, StatusOutput);
    expect(s.retention.policy).toEqual({ maxCompleted: null, maxAgeMs: HOUR, globalTimeoutMs: null });
    expect(s.retention.lastPass?.deleted).toBe(gone.length);
    expect(s.retention.totalDeleted).toBe(gone.length);
    const off = await runCli(['status'], { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app });
    expect(off.stdout).toMatch(/retention: OFF — nothing is deleted/);
  });

  it('a workflow resumed while its batch runs, and the parent of a child resumed then, are judged by the delete statement', async () => {
    await enqueue('agentWorkflow', 'cancel-2', QUEUE, agent(1, 600_000));
    await enqueue('familyWorkflow', 'famE', QUEUE, { child: agent(1, 600_000), awaitChild: false, holdMs: 0 });
    await enqueue('agentWorkflow', 'done-3', QUEUE, agent(1, 1));
    await waitStatus(tdb.sql, 'cancel-2', 'PENDING');
    await waitStatus(tdb.sql, 'famE-1', 'PENDING');
    await waitStatus(tdb.sql, 'famE', 'SUCCESS');
    await waitStatus(tdb.sql, 'done-3', 'SUCCESS');
    await client.cancelWorkflow('cancel-2');
    await client.cancelWorkflow('famE-1');
    await waitStatus(tdb.sql, 'famE-1', 'CANCELLED');
    await backdateCompletion(tdb.sql, ['cancel-2', 'famE', 'famE-1', 'done-3'], 2 * HOUR);

    const faults = new FaultInjector();
    let read: string[] = [];
    faults.on('retention.beforeDelete', async (ctx) => {
      read = ctx.workflowIds as string[];
      faults.off('retention.beforeDelete');
      // Between the read and the delete: both come back to life.
      await client.resumeWorkflow('cancel-2');
      await client.resumeWorkflow('famE-1');
    });
    const r = await pass(byAge, { faults });
    expect([...read].sort()).toEqual(['cancel-2', 'done-3', 'famE', 'famE-1']);
    expect(r.deleted).toBe(1);
    expect(await exists(tdb.sql, ['cancel-2', 'famE', 'famE-1', 'done-3'])).toEqual(['cancel-2', 'famE', 'famE-1']);
    expect(await statusOf(tdb.sql, 'famE')).toBe('SUCCESS');
  });

  it('two passes at once delete each workflow once', async () => {
    // Staged: pass A reads its batch, then pass B runs to the end before A deletes.
    const staged = await seedCompleted(tdb.sql, app, 'pair', 150, 2 * HOUR);
    let b: RetentionPassResult | undefined;
    const faults = new FaultInjector();
    faults.onNth('retention.beforeDelete', 1, async () => {
      b = await pass(byAge, { batchSize: 40 });
    });
    const a = await pass(byAge, { faults, batchSize: 40 });
    expect((a.deleted ?? 0) + (b?.deleted ?? 0)).toBe(staged.length);
    expect(b?.deleted).toBeGreaterThan(0);
    expect(await exists(tdb.sql, staged)).toEqual([]);

    // Unstaged: two passes started together, small batches so they interleave.
    const loose = await seedCompleted(tdb.sql, app, 'loose', 400, 2 * HOUR);
    const [x, y] = await Promise.all([pass(byAge, { batchSize: 20 }), pass(byAge, { batchSize: 20 })]);
    expect(x.deleted + y.deleted).toBe(loose.length);
    expect(await rowsOf(tdb.sql, loose)).toEqual(Object.fromEntries(TABLES.map(([t]) => [t, 0])));
  });

  it('keeps the newest RETENTION_MAX_COMPLETED completed workflows (rows threshold)', async () => {
    const ids = await seedCompleted(tdb.sql, app, 'rows', 30, 0);
    // Spread their completions a second apart, newest last.
    await tdb.sql.query(
      `UPDATE dbos.workflow_status SET completed_at = completed_at + split_part(workflow_uuid, '-', 2)::int * 1000 WHERE workflow_uuid = ANY($1)`,
      [ids],
    );
    const r = await pass({ RETENTION_MAX_COMPLETED: '10', AFTERLIFE_ALLOW_BELOW_FLOOR: 'RETENTION_MAX_COMPLETED' });
    const left = await tdb.sql.query<{ workflow_uuid: string }>(
      `SELECT workflow_uuid FROM dbos.workflow_status WHERE status IN ${COMPLETED} ORDER BY completed_at DESC LIMIT 10`,
    );
    // The ten newest completed are kept; seeded ones older than the tenth are gone.
    expect(left.rows.map((x) => x.workflow_uuid)).toEqual(Array.from({ length: 10 }, (_, i) => `rows-${29 - i}`));
    expect(await exists(tdb.sql, ids)).toEqual(Array.from({ length: 10 }, (_, i) => `rows-${20 + i}`).sort());
    expect(r.deleted).toBeGreaterThanOrEqual(20);
    // What must stay stays whatever the rows threshold says.
    expect(
      await exists(
        tdb.sql,
        stay.filter((id) => id !== 'recent-1'),
      ),
    ).toEqual(stay.filter((id) => id !== 'recent-1').sort());
  });

  it('the global timeout cancels the way DBOS cancels: children follow, and the caller sees CANCELLED', async () => {
    // The two the race test resumed were created (backdated) two hours ago: stop them first.
    await client.cancelWorkflow('cancel-2');
    await client.cancelWorkflow('famE-1');
    await enqueue('agentWorkflow', 'slow-1', QUEUE, agent(1, 600_000));
    await enqueue('familyWorkflow', 'famT', QUEUE, { child: agent(1, 600_000), awaitChild: true, holdMs: 0 });
    await waitStatus(tdb.sql, 'slow-1', 'PENDING');
    await waitStatus(tdb.sql, 'famT-1', 'PENDING');
    const caller = client.retrieveWorkflow('slow-1').getResult();
    const outcome = caller.then(
      () => 'resolved',
      (err: unknown) => String(err),
    );
    // Created two hours ago (the child later, as a child is).
    await tdb.sql.query(`UPDATE dbos.workflow_status SET created_at = created_at - $2::bigint WHERE workflow_uuid = ANY($1)`, [
      ['slow-1', 'famT'],
      2 * HOUR,
    ]);
    const r = await pass({ WORKFLOW_GLOBAL_TIMEOUT_MS: String(HOUR) });
    expect([...r.timedOutWorkflows].sort()).toEqual(['famT', 'slow-1']);
    expect(r.timedOut).toBe(3);
    for (const id of ['slow-1', 'famT', 'famT-1']) expect(await statusOf(tdb.sql, id)).toBe('CANCELLED');
    // Not old enough: untouched.
    expect(await statusOf(tdb.sql, 'running-1')).toBe('PENDING');
    const seen = await Promise.race([outcome, new Promise<string>((r) => setTimeout(() => r('no outcome within 20 s'), 20_000).unref())]);
    expect(seen).toMatch(/cancel/i);
    const s = await tdb.sql.query<{ total_timed_out: string }>(
      `SELECT total_timed_out FROM afterlife.retention_state WHERE application_name = $1`,
      [app],
    );
    expect(Number(s.rows[0]?.total_timed_out)).toBe(3);
  });

  it("runs in the reaper's tick when configured, and not at all when not", async () => {
    const ids = await seedCompleted(tdb.sql, app, 'tick', 5, 2 * HOUR);
    const off = retentionRuntime({});
    const rOff = await runTick({ ...off, detectedBy: 'test' }, { tick: 1, dryRun: false, planned: [], budget: unlimitedBudget() }, {});
    expect(rOff.retention).toMatchObject({ kind: 'skipped', reason: 'off' });
    expect(await exists(tdb.sql, ids)).toHaveLength(5);
    const on = retentionRuntime(byAge);
    const r = await runTick({ ...on, detectedBy: 'test' }, { tick: 1, dryRun: false, planned: [], budget: unlimitedBudget() }, {});
    // The five, and famE (its child was cancelled in the timeout test, so nothing holds it any more).
    expect(r.retention).toMatchObject({ deleted: 6 });
    expect(await exists(tdb.sql, ids)).toEqual([]);
  });

  it('a delete past its lock bound is cancelled and redone smaller; a lone workflow that keeps hitting it goes unbounded', async () => {
    // Another transaction holds a row of the oldest workflow: its delete waits, and the bound cancels it.
    const ids = await seedCompleted(tdb.sql, app, 'bound', 4, 3 * HOUR);
    const blocker = await tdb.sql.connect();
    await blocker.query('BEGIN');
    await blocker.query(`SELECT 1 FROM dbos.operation_outputs WHERE workflow_uuid = $1 FOR UPDATE`, [ids[0]]);
    const released = new Promise((r) => setTimeout(r, 1_500)).then(async () => {
      await blocker.query('COMMIT');
      blocker.release();
    });
    const r = await pass(byAge, { batchSize: 4 });
    await released;
    // Once at 4 workflows, then OVER_BOUND_RETRIES times alone; then alone without the bound (it waits).
    expect(r.overBound).toBe(1 + OVER_BOUND_RETRIES);
    expect(r.longestBatchMs).toBeGreaterThan(LOCK_BOUND_MS);
    expect(await exists(tdb.sql, ids)).toEqual([]);
    expect(await rowsOf(tdb.sql, ids)).toEqual(Object.fromEntries(TABLES.map(([t]) => [t, 0])));
  });

  it("prunes afterlife's own rows only once nothing needs them", async () => {
    const a = afterlifeDb(tdb.url);
    try {
      await tdb.sql.query(
        `INSERT INTO afterlife.executors (application_name, executor_id, state, state_changed_at) VALUES
           ($1, 'old-dead', 'dead', now() - interval '100 days'),
           ($1, 'old-dead-owner', 'dead', now() - interval '100 days'),
           ($1, 'new-dead', 'dead', now() - interval '1 day'),
           ($1, 'old-alive', 'alive', now() - interval '100 days')`,
        [app],
      );
      // A dead executor that still owns a PENDING row keeps its registry row (recovery needs it).
      await tdb.sql.query(`UPDATE dbos.workflow_status SET executor_id = 'old-dead-owner' WHERE workflow_uuid = 'running-1'`);
      // A lineage whose members are gone, and one whose root still exists.
      await tdb.sql.query(
        `INSERT INTO afterlife.forks (root_workflow_id, n, application_name, source_workflow_id, from_step, new_workflow_id, reason, forked_by, created_at) VALUES
           ('gone-root', 1, $1, 'gone-root', 1, 'gone-root-fork-1', 'diverged', 't', now() - interval '100 days'),
           ('div-1', 1, $1, 'div-1', 1, 'div-1-fork-1', 'diverged', 't', now() - interval '100 days')`,
        [app],
      );
      await seedCompleted(tdb.sql, app, 'own', 1, 2 * HOUR);
      await pass(byAge);
      const ex = await tdb.sql.query<{ executor_id: string }>(
        `SELECT executor_id FROM afterlife.executors WHERE application_name = $1 ORDER BY 1`,
        [app],
      );
      expect(ex.rows.map((x) => x.executor_id)).toEqual(['new-dead', 'old-alive', 'old-dead-owner']);
      const forks = await tdb.sql.query<{ root_workflow_id: string }>(`SELECT root_workflow_id FROM afterlife.forks ORDER BY 1`);
      expect(forks.rows.map((x) => x.root_workflow_id)).toEqual(['div-1']);
    } finally {
      await a.end();
    }
  });
});
