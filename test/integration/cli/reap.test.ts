import { describe, expect, it } from 'vitest';
import { ReapOutput } from '../../../cli/schemas.js';
import { checkpointCount, pendingIds, waitAllSuccess } from '../../helpers/agents.js';
import { cliFixture, parseJson, runCli } from '../../helpers/cli.js';
import { waitFor } from '../../helpers/db.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { createRedis } from '../../../packages/executor/src/lock/redis.js';

/**
 * `afterlife-plane reap` against real services: two real DBOS executors with the kit; exec-A is SIGKILLed and
 * its heartbeat lapses. The dry run plans to declare it dead and changes nothing; the real run declares it
 * (evidence on two ticks), recovers its workflows and exec-B completes them. A reaper holding the lease
 * elsewhere makes the CLI skip, saying so.
 */
describe('afterlife-plane reap', () => {
  // The kit's heartbeat TTL (1.5 s) and a fast tick, so two ticks of absence take about a second.
  const f = cliFixture('cli-reap', { HEARTBEAT_TTL_MS: '1500', REAPER_TICK_MS: '500' });

  it('dry run plans, the real run declares the SIGKILLed executor dead and its work completes elsewhere', async () => {
    const { tdb, env, app } = f;
    const a = await f.executor('exec-A', 'v1', { kit: true });
    await f.executor('exec-B', 'v1', { kit: true });
    const ids = ['rp-0', 'rp-1', 'rp-2'];
    for (const id of ids) await a.start(id, { steps: 3, stepMs: 500 });
    await waitFor('a checkpoint on A', async () => (await checkpointCount(tdb.sql)) >= 1);
    a.kill('SIGKILL');
    await a.exited;
    const orphans = await pendingIds(tdb.sql, 'exec-A');
    expect(orphans.length).toBeGreaterThan(0);
    // Six ticks of 500 ms cover a TTL of absence plus two ticks only once the key has actually expired.
    const redis = createRedis(TEST_REDIS_URL);
    try {
      await waitFor('exec-A heartbeat expired', async () => (await redis.exists(heartbeatKey(app, 'exec-A'))) === 0, { timeoutMs: 10_000 });
    } finally {
      redis.disconnect();
    }

    const dry = await runCli(['reap', '--dry-run', '--ticks', '6', '--json'], env, 60_000);
    expect(dry.code, dry.stderr).toBe(0);
    const planned = parseJson(dry, ReapOutput);
    expect(planned).toMatchObject({ outcome: 'completed', dryRun: true, ticks: 6 });
    expect(planned.planned.some((p) => p.pass === 'dead' && p.executorId === 'exec-A')).toBe(true);
    expect(planned.planned.some((p) => p.executorId === 'exec-B')).toBe(false);
    expect(await pendingIds(tdb.sql, 'exec-A')).toEqual(orphans);
    expect((await tdb.sql.query('SELECT 1 FROM afterlife.recoveries')).rowCount).toBe(0);

    const run = await runCli(['reap', '--ticks', '6'], env, 60_000);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^reaper: 6 tick\(s\) in /);
    expect(run.stdout).toMatch(/^declared dead: exec-A$/m);
    expect(run.stderr).toMatch(/reaping .*: 6 tick\(s\) 500ms apart/);
    // One progress line per tick, and the death as it happens.
    const ticks = [
      ...run.stderr.matchAll(
        /^ {2}tick (\d+)\/6 \(\d+ms\): dead \d+ candidate\(s\), \d+ absent, (\d+) declared.*; stuck .*; diverged .*; orphaned .*$/gm,
      ),
    ];
    expect(
      ticks.map((m) => Number(m[1])),
      run.stderr,
    ).toEqual([1, 2, 3, 4, 5, 6]);
    expect(ticks.some((m) => Number(m[2]) === 1)).toBe(true);
    expect(run.stderr).toMatch(/^ {2}declared dead: exec-A$/m);
    await waitAllSuccess(tdb.sql, ids);
    const reg = await tdb.sql.query(`SELECT executor_id, state, reason FROM afterlife.executors WHERE application_name = $1 ORDER BY 1`, [
      app,
    ]);
    expect(reg.rows).toEqual([
      { executor_id: 'exec-A', state: 'dead', reason: 'heartbeat-lapsed' },
      { executor_id: 'exec-B', state: 'alive', reason: null },
    ]);
  });

  it('skips when another reaper holds the lease; bad --ticks is a usage error', async () => {
    const { tdb, env, app } = f;
    await tdb.sql.query(
      `INSERT INTO afterlife.leases (name, holder, expires_at, acquired_at) VALUES ($1, 'the-deployed-reaper', now() + interval '1 minute', now())
       ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at`,
      [`reaper:${app}`],
    );
    const run = await runCli(['reap', '--json'], env, 30_000);
    expect(run.code, run.stderr).toBe(0);
    expect(parseJson(run, ReapOutput)).toMatchObject({ outcome: 'skipped', ticks: 0 });
    expect((await runCli(['reap'], env)).stdout).toMatch(/^reap skipped: another reaper holds the lease/);
    expect((await runCli(['reap', '--ticks', '0'], env)).code).toBe(2);
  });
});
