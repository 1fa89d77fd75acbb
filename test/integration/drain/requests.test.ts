import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  findDrainRequest,
  insertDrainRequests,
  VERSION_REQUEST_SLACK_MS,
} from '../../../packages/executor/src/db/queries/drainRequests.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';

/**
 * Which drain request an executor obeys. A version request also catches instances of that version that
 * start later, but only for its budget plus a slack: a rollback to the same version days later must not
 * drain on start. A request for an executor ID never lapses (IDs are unique per instance).
 */
describe('drain requests', () => {
  let tdb: TestDatabase;
  let db: ReturnType<typeof afterlifeDb>;
  const app = uniqueName('app-dr');
  beforeAll(async () => {
    tdb = await createTestDatabase();
    db = afterlifeDb(tdb.url);
  });
  afterAll(async () => {
    await db?.end();
    await tdb?.drop();
  });

  it('a version request is in force for its budget plus the slack, then lapses; an executor request does not', async () => {
    const budgetMs = 60_000;
    const [versionReq] = await insertDrainRequests(db, {
      applicationName: app,
      target: { applicationVersion: 'v1' },
      budgetMs,
      requestedBy: 'test',
    });
    const [execReq] = await insertDrainRequests(db, {
      applicationName: app,
      target: { executorIds: ['exec-old'] },
      budgetMs,
      requestedBy: 'test',
    });
    const newV1 = { applicationName: app, executorId: 'exec-new', applicationVersion: 'v1' };
    expect((await findDrainRequest(db, newV1))?.id).toBe(versionReq);
    expect(await findDrainRequest(db, { ...newV1, applicationVersion: 'v2' })).toBeUndefined();

    // Backdate both requests to just inside, then just outside, budget + slack.
    const backdate = (ms: number) =>
      tdb.sql.query(`UPDATE afterlife.drain_requests SET requested_at = now() - make_interval(secs => $1 / 1000.0)`, [ms]);
    await backdate(budgetMs + VERSION_REQUEST_SLACK_MS - 5_000);
    expect((await findDrainRequest(db, newV1))?.id).toBe(versionReq);
    await backdate(budgetMs + VERSION_REQUEST_SLACK_MS + 5_000);
    expect(await findDrainRequest(db, newV1)).toBeUndefined(); // the rollback to v1 starts normally
    expect((await findDrainRequest(db, { ...newV1, executorId: 'exec-old' }))?.id).toBe(execReq);
  });
});
