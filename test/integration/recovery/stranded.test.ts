import { describe, expect, it } from 'vitest';
import { StatusOutput } from '../../../cli/schemas.js';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { heartbeatKey, readHeartbeat, writeHeartbeat } from '../../../packages/executor/src/contract/heartbeat.js';
import { beat, makeOrphans } from '../../helpers/agents.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { workflowRows } from '../../helpers/db.js';
import { executorDeathFixture } from '../../helpers/executorDeath.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * Issue 24: recovered work with nowhere to go is said at once. exec-A (v1) dies; only exec-B (v2) is alive;
 * A's own last beat is still in Redis (a SIGKILLed kit's key outlives it by its TTL) and must not make v1
 * look served. The recovery logs one WARNING naming v1 and the count, with the policy and when it acts, and
 * `afterlife-plane status` shows the work as stranded.
 */
const body = (n: ReturnType<typeof deathNotice>) => JSON.parse(pubsubCloudEvent(JSON.stringify(n)).body) as unknown;

describe('stranded recovery', () => {
  const ids = ['s-a-0', 's-a-1', 's-a-2'];
  const f = executorDeathFixture('stranded', {
    serve: false,
    env: { ORPHANED_VERSION_GRACE_MS: '600000' },
    setup: ({ tdb, app }) =>
      makeOrphans({ databaseUrl: tdb.url, sql: tdb.sql, applicationName: app, executorId: 'exec-A', applicationVersion: 'v1', ids }),
  });

  it('one WARNING with the version and the count; status shows it stranded with the policy and when it acts', async () => {
    const { tdb, rt, app } = f;
    if (!rt.redis) throw new Error('Redis required');
    // The dead kit's lingering key: its last beat 5 s ago (stale after two 250 ms intervals), the key alive
    // for its 15 s TTL.
    const lastBeat = new Date(Date.now() - 5_000).toISOString();
    await writeHeartbeat(
      rt.redis,
      {
        executorId: 'exec-A',
        applicationName: app,
        applicationVersion: 'v1',
        state: 'alive',
        startedAt: lastBeat,
        beatAt: lastBeat,
        inFlight: 3,
        beatEveryMs: 250,
      },
      15_000,
    );
    const stale = await readHeartbeat(rt.redis, heartbeatKey(app, 'exec-A'));
    if (!stale?.value) throw new Error('no beat');
    await beat(rt.redis, app, 'exec-B', 'v2');

    const out = await handleDeathEvent(
      rt,
      body(
        deathNotice({
          executorId: 'exec-A',
          applicationName: app,
          reason: 'heartbeat-lapsed',
          evidence: 'liveness',
          staleBeatAt: stale.value.beatAt,
          detectedBy: 'test',
        }),
      ),
    );
    if (out.kind !== 'recovered' || out.summary.outcome === 'false-alarm') throw new Error(`unexpected ${JSON.stringify(out)}`);
    expect(out.summary.reenqueued).toBe(3);
    expect(out.summary.versionsWithoutExecutor).toEqual(['v1']);
    const warnings = rt.logger.lines.filter((l) => l.event === 'orphaned_version');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      severity: 'WARNING',
      applicationVersion: 'v1',
      count: 3,
      policy: 'leave',
      policyActsAfterMs: 600_000,
    });
    expect(String(warnings[0]?.message)).toMatch(/nowhere to go/);
    expect((await workflowRows(tdb.sql, ids)).every((r) => r.status === 'ENQUEUED' && r.application_version === 'v1')).toBe(true);

    const env = { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app, REDIS_URL: TEST_REDIS_URL, ORPHANED_VERSION_GRACE_MS: '600000' };
    const s = parseJson(await runCli(['status', '--json'], env), StatusOutput);
    expect(s.stranded.known).toBe(true);
    expect(s.stranded.policy).toBe('leave');
    expect(s.stranded.graceMs).toBe(600_000);
    expect(s.stranded.versions).toHaveLength(1);
    expect(s.stranded.versions[0]).toMatchObject({ applicationVersion: 'v1', count: 3 });
    expect(s.stranded.versions[0]?.policyActsInMs).toBeGreaterThan(500_000);
    expect(s.stranded.versions[0]?.policyActsInMs).toBeLessThanOrEqual(600_000);

    const text = await runCli(['status'], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/STRANDED/);
    expect(text.stdout.split('\n').some((l) => /^v1\s+3\s+\S+ ago\s+leave\s+in \S+/.test(l))).toBe(true);
    expect(text.stdout).toMatch(
      /ORPHANED_VERSION_POLICY=leave: after ORPHANED_VERSION_GRACE_MS \(10m\S*\) untouched the reaper reports them/,
    );

    // Once an executor of v1 beats, the same work is no longer stranded.
    await beat(rt.redis, app, 'exec-C', 'v1');
    const served = parseJson(await runCli(['status', '--json'], env), StatusOutput);
    expect(served.stranded.versions).toEqual([]);
  });
});
