import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setState } from '../../../packages/executor/src/db/queries/executors.js';
import { reenqueueSuperseded } from '../../../packages/executor/src/dbos/superseded.js';
import { SupersededSweep } from '../../../packages/executor/src/runtime/superseded.js';
import { KitTrouble } from '../../../packages/executor/src/runtime/throttle.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName, workflowRows } from '../../helpers/db.js';
import { holdLiveness, registerIncarnation } from '../../helpers/liveness.js';

/**
 * The superseded sweep's premise, statement by statement, on the real Postgres (issue 30; the end-to-end
 * case with real executors is test/integration/detection/duplicateId.test.ts). The registry records an
 * incarnation taken over while alive, and only then; the sweep moves nothing before this incarnation holds
 * the ID's lock, never a row DBOS runs here, never a row claimed after the lock was held, never a row whose
 * owner token changed between its two readings; and the re-enqueue itself refuses once the lock is not this
 * incarnation's, whatever the caller believed.
 */
describe('kit: the superseded sweep', () => {
  let tdb: TestDatabase;
  let db: ReturnType<typeof afterlifeDb>;
  const app = uniqueName('app-sweep');
  const sessions: pg.Client[] = [];
  beforeAll(async () => {
    tdb = await createTestDatabase();
    db = afterlifeDb(tdb.url);
  });
  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.end().catch(() => undefined)));
    await db?.pool.end();
    await tdb?.drop();
  });

  const register = (executorId: string, incarnation: string) => registerIncarnation(db, app, executorId, incarnation);
  /** A PENDING row as DBOS leaves it: claimed (claim time, DB clock) or started directly (none). */
  const pending = async (id: string, executorId: string, owner: string, claimedAgoMs: number | null) => {
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name,
                                         created_at, updated_at, started_at_epoch_ms, owner_xid, queue_name)
       VALUES ($1, 'PENDING', 'agentWorkflow', $2, 'v1', $3, $4, $4,
               CASE WHEN $5::bigint IS NULL THEN NULL ELSE (EXTRACT(EPOCH FROM now()) * 1000)::bigint - $5::bigint END, $6, NULL)`,
      [id, executorId, app, Date.now(), claimedAgoMs, owner],
    );
  };
  const superseded = async (executorId: string) =>
    (
      await tdb.sql.query<{ superseded_incarnation: string | null }>(
        `SELECT superseded_incarnation FROM afterlife.executors WHERE application_name = $1 AND executor_id = $2`,
        [app, executorId],
      )
    ).rows[0]?.superseded_incarnation;

  it('registration records a live incarnation it takes over, and no dead or drained one', async () => {
    await register('reg-live', 'a1');
    expect(await register('reg-live', 'a2')).toEqual({ ours: true, superseded: 'a1', supersededSession: null });
    // Registering again as the same incarnation keeps the record.
    expect(await register('reg-live', 'a2')).toEqual({ ours: true, superseded: 'a1', supersededSession: null });
    for (const state of ['dead', 'drained'] as const) {
      const id = `reg-${state}`;
      await register(id, 'b1');
      await setState(db, { applicationName: app, executorId: id, state, reason: 'sigterm', incarnation: 'b1' });
      expect(await register(id, 'b2')).toEqual({ ours: true, superseded: null, supersededSession: null });
    }
  });

  it("moves only the superseded process's rows, once seen twice with one owner token, and only while holding the lock", async () => {
    const executorId = 'sweep-x';
    await register(executorId, 'old');
    await pending('left-claimed', executorId, 'tok-old', 5_000);
    await pending('left-direct', executorId, 'tok-old-direct', null);
    await pending('mine', executorId, 'tok-new', 4_000);
    await pending('flip', executorId, 'tok-old-2', 3_000);
    await pending('other', 'another-exec', 'tok-other', 5_000);
    const held = await holdLiveness(db, tdb.url, { applicationName: app, executorId, incarnation: 'new' });
    sessions.push(held.session);
    expect(held.took).toEqual([{ ok: true, recorded: true }]);
    expect(await superseded(executorId)).toBe('old');

    let now = 0;
    let holding = false;
    const log = memoryLogger();
    const sweep = new SupersededSweep({
      db,
      applicationName: app,
      executorId,
      incarnation: 'new',
      superseded: 'old',
      log,
      trouble: new KitTrouble(log, 'afterlife'),
      held: () => holding,
      active: () => true,
      runningIds: () => new Set(['mine']),
      everyMs: 3_600_000,
      confirmMs: 3_000,
      now: () => now,
    });
    const statuses = async () =>
      Object.fromEntries(
        (await workflowRows(tdb.sql, ['left-claimed', 'left-direct', 'mine', 'flip', 'other', 'late'])).map((r) => [
          r.workflow_uuid,
          r.status,
        ]),
      );

    // Not before this process holds the lock (the superseded one may still be live).
    now = 10_000;
    await sweep.tick();
    holding = true;
    await sweep.tick(); // first reading at t = 10 s
    // After that reading, a claim under the ID is this process's (the other one is gone): never moved.
    await pending('late', executorId, 'tok-late', -60_000);
    // A claim lands on `flip` between the readings: its token changes, so it starts over.
    await tdb.sql.query(`UPDATE dbos.workflow_status SET owner_xid = 'tok-new-2' WHERE workflow_uuid = 'flip'`);
    now = 12_000;
    await sweep.tick();
    expect(await statuses()).toMatchObject({ 'left-claimed': 'PENDING', 'left-direct': 'PENDING', flip: 'PENDING' });
    now = 13_000;
    await sweep.tick();
    expect(await statuses()).toEqual({
      'left-claimed': 'ENQUEUED',
      'left-direct': 'ENQUEUED',
      mine: 'PENDING',
      flip: 'PENDING',
      other: 'PENDING',
      late: 'PENDING',
    });
    const moved = await workflowRows(tdb.sql, ['left-direct']);
    expect(moved[0]).toMatchObject({ queue_name: '_dbos_internal_queue', executor_id: executorId });
    now = 15_000;
    await sweep.tick();
    expect((await statuses()).flip).toBe('ENQUEUED');
    // Nothing of the other process is left: the record is cleared, and `mine`, `late`, `other` stay as they were.
    expect(await superseded(executorId)).toBeNull();
    expect(await statuses()).toMatchObject({ mine: 'PENDING', late: 'PENDING', other: 'PENDING' });
    const events = log.lines.map((l) => l.event).filter(Boolean);
    expect(events).toEqual(['superseded_work_recovered', 'superseded_work_recovered', 'superseded_sweep_done']);
  });

  it('the re-enqueue refuses once the lock is not this incarnation’s, or the registry names another, whatever the caller saw', async () => {
    const executorId = 'sweep-y';
    await register(executorId, 'old');
    await pending('y-left', executorId, 'tok-y', 5_000);
    const held = await holdLiveness(db, tdb.url, { applicationName: app, executorId, incarnation: 'new' });
    const row = { workflowId: 'y-left', ownerXid: 'tok-y', applicationVersion: 'v1' };
    const call = (incarnation: string, ownerXid = 'tok-y') =>
      reenqueueSuperseded(db, {
        applicationName: app,
        executorId,
        incarnation,
        claimedByMs: Date.now() + 60_000,
        rows: [{ ...row, ownerXid }],
      });
    // Another incarnation's word, or a token that is not the row's: nothing moves.
    expect(await call('old')).toEqual([]);
    expect(await call('new', 'tok-other')).toEqual([]);
    // The lock's session ends (the holder is gone): the statement re-checks it and moves nothing.
    await held.session.end();
    expect(await call('new')).toEqual([]);
    expect((await workflowRows(tdb.sql, ['y-left']))[0]?.status).toBe('PENDING');
    // Held again by this incarnation: it moves, once.
    const again = await holdLiveness(db, tdb.url, { applicationName: app, executorId, incarnation: 'new' });
    sessions.push(again.session);
    expect(await call('new')).toEqual(['y-left']);
    expect(await call('new')).toEqual([]);
  });
});
