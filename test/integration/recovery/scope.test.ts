import { describe, expect, it } from 'vitest';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { beat, makeOrphans, waitAllSuccess } from '../../helpers/agents.js';
import { pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { uniqueName, workflowRows } from '../../helpers/db.js';
import { startExecutor } from '../../helpers/executor.js';
import { executorDeathFixture } from '../../helpers/executorDeath.js';

/**
 * A notice for exec-A of app X re-enqueues only exec-A's rows of X (and of the versions it
 * names); another app's exec-A, another executor and another version are untouched. A fleet running only
 * v2 leaves A's v1 rows ENQUEUED, and the summary and the log say so.
 */
const body = (n: ReturnType<typeof deathNotice>) => JSON.parse(pubsubCloudEvent(JSON.stringify(n)).body) as unknown;

describe('recovery scope', () => {
  const y = uniqueName('app-y');
  const f = executorDeathFixture('app-x', {
    serve: false,
    setup: async ({ tdb, app: x }) => {
      const common = { databaseUrl: tdb.url, sql: tdb.sql };
      await makeOrphans({
        ...common,
        applicationName: x,
        executorId: 'exec-A',
        applicationVersion: 'v1',
        ids: ['x-a-v1-0', 'x-a-v1-1', 'x-a-v1-2'],
      });
      await makeOrphans({ ...common, applicationName: x, executorId: 'exec-A', applicationVersion: 'v2', ids: ['x-a-v2-0'] });
      // DBOS 5.3 requires version names to be unique across the apps of one system database.
      await makeOrphans({ ...common, applicationName: y, executorId: 'exec-A', applicationVersion: 'y1', ids: ['y-a-v1-0'] });
      await makeOrphans({ ...common, applicationName: x, executorId: 'exec-C', applicationVersion: 'v1', ids: ['x-c-v1-0'] });
    },
  });
  const x = f.app;

  it('touches only the named executor, app and versions; a v2-only fleet leaves v1 ENQUEUED and says so', async () => {
    const b = await startExecutor({ databaseUrl: f.tdb.url, applicationName: x, applicationVersion: 'v2', executorId: 'exec-B' });
    f.executors.push(b);
    if (f.rt.redis) await beat(f.rt.redis, x, 'exec-B', 'v2');

    const out = await handleDeathEvent(
      f.rt,
      body(deathNotice({ executorId: 'exec-A', applicationName: x, applicationVersions: ['v1'], reason: 'manual', detectedBy: 'test' })),
    );
    expect(out.ack).toBe(true);
    if (out.kind !== 'recovered' || out.summary.outcome === 'false-alarm') throw new Error(`unexpected ${JSON.stringify(out)}`);
    expect(out.summary.reenqueued).toBe(3);
    expect(out.summary.versionsWithoutExecutor).toEqual(['v1']);
    expect(f.rt.logger.lines.some((l) => l.event === 'orphaned_version' && l.applicationVersion === 'v1' && l.severity === 'WARNING')).toBe(
      true,
    );

    const rows = Object.fromEntries(
      (await workflowRows(f.tdb.sql, ['x-a-v1-0', 'x-a-v1-1', 'x-a-v1-2', 'x-a-v2-0', 'y-a-v1-0', 'x-c-v1-0'])).map((r) => [
        r.workflow_uuid,
        r,
      ]),
    );
    for (const id of ['x-a-v1-0', 'x-a-v1-1', 'x-a-v1-2'])
      expect(rows[id]).toMatchObject({ status: 'ENQUEUED', application_version: 'v1' });
    expect(rows['x-a-v2-0']).toMatchObject({ status: 'PENDING', executor_id: 'exec-A' }); // version not named
    expect(rows['y-a-v1-0']).toMatchObject({ status: 'PENDING', executor_id: 'exec-A' }); // another app
    expect(rows['x-c-v1-0']).toMatchObject({ status: 'PENDING', executor_id: 'exec-C' }); // another executor

    // A notice without versions recovers the rest of exec-A's rows in app X, and the v2 fleet runs them.
    const all = await handleDeathEvent(
      f.rt,
      body(deathNotice({ executorId: 'exec-A', applicationName: x, reason: 'manual', detectedBy: 'test' })),
    );
    if (all.kind !== 'recovered' || all.summary.outcome === 'false-alarm') throw new Error('unexpected');
    expect(all.summary.reenqueued).toBe(1);
    await waitAllSuccess(f.tdb.sql, ['x-a-v2-0'], 30_000);
    // B has polled and claimed since the v1 rows were re-enqueued, and still never took them.
    const v1 = await workflowRows(f.tdb.sql, ['x-a-v1-0', 'x-a-v1-1', 'x-a-v1-2']);
    expect(v1.every((r) => r.status === 'ENQUEUED' && r.application_version === 'v1')).toBe(true);
    const untouched = await workflowRows(f.tdb.sql, ['y-a-v1-0', 'x-c-v1-0']);
    expect(untouched.every((r) => r.status === 'PENDING')).toBe(true);
  });
});
