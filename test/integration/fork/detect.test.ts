import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { findDiverged } from '../../../shared/dbos/diverged.js';
import { parseDivergence } from '../../../packages/executor/src/dbos/divergence.js';
import { repairDepsFromRuntime } from '../../../shared/repair/deps.js';
import { cancelForkedOriginals } from '../../../shared/repair/situations/orphanedFork.js';
import { repairFixture } from '../../helpers/repair.js';

/**
 * Detection on stored payloads (the envelope DBOS 5.3 writes, as observed, and the legacy column), and the
 * reaper's scan: only top-level, not-yet-forked, not-dead-lettered code-26 ERRORs of this app. The rows are
 * written by hand with DBOS's exact shapes; the real executors' rows are covered in divergence.test.ts.
 */
const MSG = (wf: string, step: number) =>
  `During execution of workflow ${wf} step ${step}, function step1 was recorded when step2 was expected. Check that your workflow is deterministic.`;
const envelope = (wf: string, step: number) =>
  JSON.stringify({
    json: {
      dbosErrorCode: 26,
      workflowID: wf,
      stepID: step,
      expectedName: 'step2',
      name: 'Error',
      message: MSG(wf, step),
      stack: 'Error: ...',
    },
    __dbos_serializer: 'superjson',
  });

describe('divergence detection', () => {
  it('reads code 26 from the superjson envelope, a bare error, or the message alone', () => {
    expect(parseDivergence(envelope('wf-1', 3))).toEqual({ workflowId: 'wf-1', stepId: 3, expectedName: 'step2', message: MSG('wf-1', 3) });
    expect(parseDivergence(JSON.stringify({ message: MSG('child-9', 0), name: 'Error' }))).toMatchObject({
      workflowId: 'child-9',
      stepId: 0,
    });
    expect(parseDivergence(MSG('legacy', 2))).toMatchObject({ workflowId: 'legacy', stepId: 2, expectedName: 'step2' });
  });

  it('never reports an ordinary error, a different DBOS code, or garbage', () => {
    const other = JSON.stringify({
      json: { dbosErrorCode: 12, message: 'Workflow was cancelled', name: 'Error' },
      __dbos_serializer: 'superjson',
    });
    expect(parseDivergence(other)).toBeUndefined();
    expect(
      parseDivergence(JSON.stringify({ json: { message: 'tool exploded', name: 'Error' }, __dbos_serializer: 'superjson' })),
    ).toBeUndefined();
    expect(parseDivergence('{not json')).toBeUndefined();
    expect(parseDivergence(null)).toBeUndefined();
    expect(parseDivergence(JSON.stringify({ json: { dbosErrorCode: 26, name: 'Error' } }))).toBeUndefined(); // no step to fork from
  });
});

describe('findDiverged (the reaper pass scan)', () => {
  const f = repairFixture('scan-app', { divergentChoice: false, redis: 'none', setup: ({ tdb, app }) => seed(tdb.sql, app) });

  async function seed(sql: pg.Pool, APP: string): Promise<void> {
    const rows: Array<
      [id: string, app: string | null, parent: string | null, forked: boolean, legacy: string | null, output: string | null]
    > = [
      ['new-style', APP, null, false, null, envelope('new-style', 1)],
      ['legacy', APP, null, false, MSG('legacy', 2), null],
      ['unclaimed', null, null, false, null, envelope('unclaimed', 1)],
      ['ordinary', APP, null, false, null, JSON.stringify({ json: { message: 'tool exploded' }, __dbos_serializer: 'superjson' })],
      ['child', APP, 'new-style', false, null, envelope('child', 1)],
      ['forked-already', APP, null, true, null, envelope('forked-already', 1)],
      ['dead', APP, null, false, null, envelope('dead', 1)],
      ['other-app', 'someone-else', null, false, null, envelope('other-app', 1)],
      ['p-fork-1-child-1', APP, null, false, null, envelope('p-fork-1-child-1', 1)], // a fresh child fork: no parent_workflow_id
      ['c-fork-1', APP, null, false, null, envelope('c-fork-1', 1)], // a fork-to-latest fork of a child
    ];
    for (const [id, app, parent, forked, legacy, output] of rows) {
      await sql.query(
        `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, application_name, parent_workflow_id, was_forked_from, error)
         VALUES ($1, 'ERROR', 'wf', $2, $3, $4, $5)`,
        [id, app, parent, forked, legacy],
      );
      if (output) await sql.query(`INSERT INTO dbos.workflow_output (workflow_uuid, error) VALUES ($1, $2)`, [id, output]);
    }
    await sql.query(
      `INSERT INTO afterlife.dead_letters (root_workflow_id, application_name, workflow_id, forks, reason, published_at) VALUES ('dead', $1, 'dead', 3, 'diverged', now())`,
      [APP],
    );
    await sql.query(
      `INSERT INTO afterlife.forks (root_workflow_id, n, application_name, source_workflow_id, from_step, new_workflow_id, reason, forked_by, child_fork_id, awaited_by, original_cancelled_at)
       VALUES ('p', 1, $1, 'p', 2, 'p-fork-1', 'child-diverged', 'test', 'p-fork-1-child-1', NULL, NULL),
              ('c', 1, $1, 'c', 3, 'c-fork-1', 'orphaned-version', 'test', NULL, 'q-fork-1', now())`,
      [APP],
    );
  }

  it('lists only top-level, unforked, not dead-lettered code-26 ERRORs of this app (legacy column included), never a child’s fork', async () => {
    const { db } = f.rt;
    const APP = f.app;
    const found = await findDiverged(db, APP, 100);
    expect(found.map((f) => f.workflowId).sort()).toEqual(['legacy', 'new-style', 'unclaimed']);
    expect(found.find((f) => f.workflowId === 'legacy')?.divergence.stepId).toBe(2);
    expect(await findDiverged(db, APP, 1)).toHaveLength(1);
  });

  it('cancelForkedOriginals finishes a fork-to-latest interrupted between the fork and the cancel', async () => {
    const { tdb, app: APP } = f;
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, application_name, queue_name, application_version)
                         VALUES ('orig', 'ENQUEUED', 'wf', $1, '_dbos_internal_queue', 'v1')`,
      [APP],
    );
    await tdb.sql.query(
      `INSERT INTO afterlife.forks (root_workflow_id, n, application_name, source_workflow_id, from_step, new_workflow_id, reason, forked_by)
       VALUES ('orig', 1, $1, 'orig', 2, 'orig-fork-1', 'orphaned-version', 'test')`,
      [APP],
    );
    const deps = repairDepsFromRuntime(f.rt);
    expect(await cancelForkedOriginals(deps)).toEqual(['orig']);
    expect(await cancelForkedOriginals(deps)).toEqual([]);
    const row = await tdb.sql.query(`SELECT status, queue_name FROM dbos.workflow_status WHERE workflow_uuid = 'orig'`);
    expect(row.rows).toEqual([{ status: 'CANCELLED', queue_name: null }]);
  });
});
