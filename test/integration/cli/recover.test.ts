import { afterAll, describe, expect, it } from 'vitest';
import { ErrorOutput, RecoverOutput } from '../../../cli/schemas.js';
import { createRedis } from '../../../packages/executor/src/lock/redis.js';
import { auditedIds, beat, checkpointCount, pendingIds, waitAllSuccess } from '../../helpers/agents.js';
import { cliFixture, parseJson, runCli } from '../../helpers/cli.js';
import { waitFor } from '../../helpers/db.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * `afterlife-plane recover` against real services: a real DBOS executor is SIGKILLed mid-run; the dry run counts
 * its orphans and changes nothing; the recovery re-enqueues exactly them (audited) and a live executor of
 * the same version completes them. A live executor is refused without --force.
 */
describe('afterlife-plane recover', () => {
  const f = cliFixture('cli-recover');
  const redis = createRedis(TEST_REDIS_URL);
  afterAll(() => redis.disconnect());

  it('dry run counts, recovery re-enqueues exactly the orphans, a live executor finishes them', async () => {
    const { tdb, env, app } = f;
    const a = await f.executor('exec-A', 'v1');
    const ids = Array.from({ length: 5 }, (_, i) => `r-${i}`);
    for (const id of ids) await a.start(id, { steps: 3, stepMs: 300 });
    await waitFor('a checkpoint', async () => (await checkpointCount(tdb.sql)) >= 2);
    a.kill('SIGKILL');
    await a.exited;
    const orphans = await pendingIds(tdb.sql, 'exec-A');
    expect(orphans.length).toBeGreaterThan(0);

    const dry = await runCli(['recover', 'exec-A', '--dry-run', '--json'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(parseJson(dry, RecoverOutput)).toMatchObject({
      dryRun: true,
      outcome: 'dry-run',
      reenqueued: 0,
      pendingByVersion: { v1: orphans.length },
    });
    expect(await pendingIds(tdb.sql, 'exec-A')).toEqual(orphans);
    const dryText = await runCli(['recover', 'exec-A', '--dry-run'], env);
    // Whether the real run would go ahead depends on the heartbeat's TTL running out after the kill: either is said.
    expect(
      dryText.stdout.startsWith(
        `exec-A owns ${orphans.length} PENDING workflow(s) (v1: ${orphans.length}); dry run: nothing changed; the real run would `,
      ),
    ).toBe(true);

    await f.executor('exec-B', 'v1');
    await beat(redis, app, 'exec-B', 'v1');

    // Batches of 2, so the per-batch progress on stderr has several lines to show.
    const run = await runCli(['recover', 'exec-A', '--json'], { ...env, RECOVERY_BATCH_SIZE: '2' });
    expect(run.code, run.stderr).toBe(0);
    const out = parseJson(run, RecoverOutput);
    expect(out).toMatchObject({
      dryRun: false,
      outcome: 'completed',
      reenqueued: orphans.length,
      lockMode: 'locked',
      versionsWithoutExecutor: [],
    });
    expect(run.stderr).toMatch(`recovering exec-A: ${orphans.length} PENDING workflow(s) (v1: ${orphans.length})`);
    const batches = [...run.stderr.matchAll(/^ {2}batch (\d+): re-enqueued (\d+) \((\d+)\/(\d+)\)$/gm)].map((m) => m.slice(1).map(Number));
    expect(batches.length, run.stderr).toBeGreaterThanOrEqual(Math.ceil(orphans.length / 2));
    expect(batches.map((b) => b[0])).toEqual(batches.map((_, i) => i + 1));
    expect(batches.every((b) => (b[1] ?? 0) <= 2 && b[3] === orphans.length)).toBe(true);
    expect(batches.at(-1)?.[2]).toBe(orphans.length);
    expect(await auditedIds(tdb.sql, 'exec-A')).toEqual([...orphans].sort());
    const audit = await tdb.sql.query<{ id: string; recovered_by: string; detected_by: string }>(
      `SELECT id::text, recovered_by, detected_by FROM afterlife.recoveries`,
    );
    expect(audit.rows).toHaveLength(1);
    expect(Number(audit.rows[0]?.id)).toBe(out.recoveryId);
    expect(audit.rows[0]?.detected_by).toBe('afterlife-cli');
    expect(audit.rows[0]?.recovered_by).toMatch(/^cli:/);
    await waitAllSuccess(tdb.sql, ids);

    // Again: nothing left to do; the text output says so in one line.
    const again = await runCli(['recover', 'exec-A'], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/re-enqueued 0 workflow\(s\) of exec-A/);
  });

  it('refuses an executor with a fresh heartbeat unless --force', async () => {
    const { env, app } = f;
    await beat(redis, app, 'exec-live', 'v1');
    const run = await runCli(['recover', 'exec-live', '--json'], env);
    expect(run.code).toBe(1);
    expect(parseJson(run, ErrorOutput).error.message).toMatch(/exec-live has a fresh heartbeat .* --force/);
    const forced = await runCli(['recover', 'exec-live', '--force', '--json'], env);
    expect(forced.code, forced.stderr).toBe(0);
    expect(parseJson(forced, RecoverOutput).outcome).toBe('nothing-to-do');
  });

  it('without Redis it refuses unless --force (no heartbeat evidence), then runs degraded and says so', async () => {
    const { tdb, env, app } = f;
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name) VALUES ('d-1', 'PENDING', 'agentWorkflow', 'exec-D', 'v9', $1)`,
      [app],
    );
    const refused = await runCli(['recover', 'exec-D'], { ...env, REDIS_URL: '' });
    expect(refused.code).toBe(1);
    expect(refused.stderr + refused.stdout).toMatch(/cannot read exec-D's heartbeat .*--force/);
    const run = await runCli(['recover', 'exec-D', '--force'], { ...env, REDIS_URL: '' });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/re-enqueued 1 workflow\(s\) of exec-D .*\(degraded\)/);
    expect(run.stdout).toMatch(/warning: ran without the Redis lock/);
  });

  it('usage errors exit 2', async () => {
    const { env } = f;
    expect((await runCli(['recover'], env)).code).toBe(2);
    expect((await runCli(['recover', 'a', 'b'], env)).code).toBe(2);
  });
});
