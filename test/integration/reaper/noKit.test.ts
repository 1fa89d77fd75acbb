import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionPrefix } from '../../../shared/dbos/reaper.js';
import { runReaper, type ReaperSummary } from '../../../shared/reaper/index.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { backdateSentinel, FAST_REAPER_ENV, reaperFixture, testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';
import { ADMIN_DATABASE_URL } from '../../helpers/services.js';

/**
 * An executor without the kit (it never heart-beat) is judged by pg_stat_activity and the
 * activity clock. Left alone while one of its sessions is connected (even with activity older than the
 * grace), left alone when afterlife's role cannot see other roles' sessions, left alone with no session
 * but activity inside the grace, and recovered once it has no session and quiet workflows. On this path too,
 * a checkpoint landing between detection and the recovery statement keeps that workflow where
 * it is, and when it lands on every workflow the executor is not declared dead at all.
 */
describe('reaper: an executor without the kit', () => {
  const faults = new FaultInjector();
  const role = `reaper_nopriv_${randomBytes(4).toString('hex')}`;
  const env = { UNKNOWN_EXECUTOR_GRACE_MS: '60000', STUCK_AFTER_MS: '86400000' };
  const fx = reaperFixture('app-nokit', { faults, env });
  let rtNoPriv: ReturnType<typeof testRuntime> | undefined;
  const ids = ['nokit-1', 'nokit-2'];

  const tick = async (r: ReturnType<typeof testRuntime>) => {
    const s: ReaperSummary = await runReaper(testReaperDeps(r), { maxTicks: 1 });
    if (s.outcome !== 'completed') throw new Error('skipped');
    return s;
  };
  const state = async () => (await workflowRows(fx.tdb.sql, ids)).map((r) => [r.workflow_uuid, r.status, r.executor_id]);

  beforeAll(async () => {
    await fx.executor('exec-live', { beat: true });
    const noKit = await fx.executor('exec-nokit');
    for (const id of ids) await noKit.start(id, { steps: 2, stepMs: 60_000 });
    await waitFor('both PENDING on exec-nokit', async () =>
      (await workflowRows(fx.tdb.sql, ids)).every((r) => r.status === 'PENDING' && r.executor_id === 'exec-nokit'),
    );
    // Claimed two hours ago and no checkpoint since: older than the grace (1 min) by far.
    await fx.tdb.sql.query(
      `UPDATE dbos.workflow_status SET started_at_epoch_ms = started_at_epoch_ms - 7200000, updated_at = updated_at - 7200000 WHERE workflow_uuid = ANY($1)`,
      [ids],
    );
  });
  afterAll(async () => {
    await rtNoPriv?.close();
    await fx.tdb.sql.query(`DROP OWNED BY ${role}`).catch(() => undefined);
    const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
    await admin.connect();
    await admin.query(`DROP ROLE IF EXISTS ${role}`);
    await admin.end();
  });

  it('left alone while one of its sessions is in pg_stat_activity, even with old activity', async () => {
    for (let i = 0; i < 3; i++) {
      const s = await tick(fx.rt);
      expect(s.sessions).toBe('visible');
      expect(s.declaredDead).toEqual([]);
    }
    expect(await state()).toEqual(ids.map((id) => [id, 'PENDING', 'exec-nokit']));
  });

  it('a kit registered without Redis (no heartbeats) is judged by sessions, never by a key it never writes', async () => {
    const { tdb, app } = fx;
    await tdb.sql.query(
      `INSERT INTO afterlife.executors (application_name, executor_id, state, heartbeats) VALUES ($1, 'exec-nokit', 'alive', false)`,
      [app],
    );
    // Its key has "been absent" for 10 s over a tick already: enough for a kit that beats.
    const absent = async () => {
      await backdateSentinel(fx.rt);
      await tdb.sql.query(
        `INSERT INTO afterlife.executor_observations AS o (application_name, executor_id, evidence, first_absent_at, last_absent_at, absent_ticks)
         VALUES ($1, 'exec-nokit', 'heartbeat', now() - interval '10 s', now(), 1)
         ON CONFLICT (application_name, executor_id) DO UPDATE
            SET evidence = 'heartbeat', first_absent_at = now() - interval '10 s', last_absent_at = now(), absent_ticks = 1, declared_dead_at = NULL`,
        [app],
      );
    };
    try {
      await absent();
      for (let i = 0; i < 2; i++) expect((await tick(fx.rt)).declaredDead).toEqual([]);
      expect(await state()).toEqual(ids.map((id) => [id, 'PENDING', 'exec-nokit']));
      // Control: the same executor registered as a beating kit would be declared dead on that evidence.
      await tdb.sql.query(`UPDATE afterlife.executors SET heartbeats = true WHERE application_name = $1 AND executor_id = 'exec-nokit'`, [
        app,
      ]);
      await absent();
      const dry = await runReaper(testReaperDeps(fx.rt), { maxTicks: 1, dryRun: true });
      if (dry.outcome !== 'completed') throw new Error('skipped');
      expect((dry.planned ?? []).some((p) => p.pass === 'dead' && p.executorId === 'exec-nokit')).toBe(true);
    } finally {
      await tdb.sql.query(`DELETE FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'exec-nokit'`, [app]);
      await tdb.sql.query(`DELETE FROM afterlife.executor_observations WHERE application_name = $1 AND executor_id = 'exec-nokit'`, [app]);
    }
    expect(await state()).toEqual(ids.map((id) => [id, 'PENDING', 'exec-nokit']));
  });

  it('left alone when afterlife’s role cannot see other roles’ sessions', async () => {
    const noKit = fx.executors[1]!;
    const { tdb, app } = fx;
    noKit.kill('SIGKILL');
    await noKit.exited;
    await waitFor('its sessions leave pg_stat_activity', async () => {
      const r = await tdb.sql.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND starts_with(application_name, $1)`,
        [sessionPrefix('exec-nokit')],
      );
      return (r.rows[0] as { n: number }).n === 0;
    });
    await tdb.sql.query(`CREATE ROLE ${role} LOGIN PASSWORD 'x'`);
    await tdb.sql.query(`GRANT USAGE ON SCHEMA dbos, afterlife TO ${role}`);
    await tdb.sql.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA dbos, afterlife TO ${role}`);
    await tdb.sql.query(`GRANT USAGE ON ALL SEQUENCES IN SCHEMA afterlife TO ${role}`);
    const url = new URL(tdb.url);
    url.username = role;
    url.password = 'x';
    rtNoPriv = testRuntime({ databaseUrl: url.toString(), applicationName: app, env: { ...FAST_REAPER_ENV, ...env } });
    // What this Postgres shows such a role about other roles' sessions (for the report).
    const seen = await rtNoPriv.db.query<{ n: number; named: number }>(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE application_name <> '')::int AS named FROM pg_stat_activity WHERE usename <> current_user`,
    );
    console.log(
      `[executor without the kit] unprivileged role sees ${seen.rows[0]?.n} foreign sessions, ${seen.rows[0]?.named} with an application_name`,
    );
    for (let i = 0; i < 3; i++) {
      const s = await tick(rtNoPriv);
      expect(s.sessions).toBe('unknown');
      expect(s.declaredDead).toEqual([]);
    }
    expect(rtNoPriv.logger.lines.some((l) => l.event === 'sessions_unknown')).toBe(true);
    expect(await state()).toEqual(ids.map((id) => [id, 'PENDING', 'exec-nokit']));
  });

  it('left alone when REAPER_SESSION_EVIDENCE=none (a pooler hides application_name), though it has no session', async () => {
    const rt = fx.rt;
    const config = { ...rt.config, reaper: { ...rt.config.reaper, sessionEvidence: 'none' as const } };
    for (let i = 0; i < 3; i++) {
      const s = await runReaper(testReaperDeps(rt, { config }), { maxTicks: 1 });
      if (s.outcome !== 'completed') throw new Error('skipped');
      expect(s.sessions).toBe('unknown');
      expect(s.declaredDead).toEqual([]);
    }
    expect(rt.logger.lines.some((l) => l.event === 'sessions_unknown' && String(l.message).includes('REAPER_SESSION_EVIDENCE=none'))).toBe(
      true,
    );
    expect(await state()).toEqual(ids.map((id) => [id, 'PENDING', 'exec-nokit']));
  });

  /** Forgets the absence streak and declarations, so the next test starts from a first absent tick. */
  const forgetObservations = () =>
    fx.tdb.sql.query(`DELETE FROM afterlife.executor_observations WHERE application_name = $1 AND executor_id = 'exec-nokit'`, [fx.app]);
  const recoveries = async () =>
    (await fx.tdb.sql.query(`SELECT outcome, reenqueued, error FROM afterlife.recoveries WHERE executor_id = 'exec-nokit' ORDER BY id`))
      .rows;
  const registryDead = async () =>
    (await fx.tdb.sql.query(`SELECT 1 FROM afterlife.executors WHERE executor_id = 'exec-nokit' AND state = 'dead'`)).rowCount;

  it('left alone, with no session, while its workflows were active within UNKNOWN_EXECUTOR_GRACE_MS', async () => {
    const { tdb, app } = fx;
    // Claimed 30 s ago: inside the grace (1 min). Its sessions are gone (killed above).
    await tdb.sql.query(
      `UPDATE dbos.workflow_status SET started_at_epoch_ms = (EXTRACT(EPOCH FROM now())*1000)::bigint - 30000 WHERE workflow_uuid = ANY($1)`,
      [ids],
    );
    try {
      for (let i = 0; i < 3; i++) {
        const s = await tick(fx.rt);
        expect(s.sessions).toBe('visible');
        expect(s.declaredDead).toEqual([]);
      }
      // It was judged (no session on every tick, enough for the streak): the activity clock alone kept it.
      const obs = await tdb.sql.query<{ absent_ticks: number }>(
        `SELECT absent_ticks FROM afterlife.executor_observations WHERE application_name = $1 AND executor_id = 'exec-nokit'`,
        [app],
      );
      expect(obs.rows[0]?.absent_ticks).toBeGreaterThanOrEqual(3);
      expect(await state()).toEqual(ids.map((id) => [id, 'PENDING', 'exec-nokit']));
      expect(await recoveries()).toEqual([]);
    } finally {
      await tdb.sql.query(
        `UPDATE dbos.workflow_status SET started_at_epoch_ms = (EXTRACT(EPOCH FROM now())*1000)::bigint - 7200000 WHERE workflow_uuid = ANY($1)`,
        [ids],
      );
      await forgetObservations();
    }
  });

  it('a recovery whose guard rejects every row (both checkpointed since detection) is no death', async () => {
    const { tdb } = fx;
    // Step rows at function_id 100: clear of the checkpoint the next test writes at 0.
    faults.on('reaper.beforeDeclareDead', async () => {
      await tdb.sql.query(
        `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms)
         SELECT id, 100, 'late-step', (EXTRACT(EPOCH FROM now())*1000)::bigint, (EXTRACT(EPOCH FROM now())*1000)::bigint
           FROM unnest($1::text[]) AS id`,
        [ids],
      );
    });
    try {
      expect((await tick(fx.rt)).declaredDead).toEqual([]); // absent on one tick only
      const s = await tick(fx.rt);
      expect(s.declaredDead).toEqual([]);
      expect(s.passes.dead.activityResumed).toBe(1);
      expect(s.passes.dead.recoveredInline).toBe(0);
      expect(s.passes.dead.reenqueued).toBe(0);
    } finally {
      faults.off('reaper.beforeDeclareDead');
      await tdb.sql.query(`DELETE FROM dbos.operation_outputs WHERE function_id = 100 AND workflow_uuid = ANY($1)`, [ids]);
      await forgetObservations();
    }
    expect(await state()).toEqual(ids.map((id) => [id, 'PENDING', 'exec-nokit']));
    // The audit keeps the attempt and says why nothing moved; the registry does not call it dead.
    expect(await recoveries()).toEqual([{ outcome: 'partial', reenqueued: 0, error: expect.stringContaining('guard rejected all 2') }]);
    expect(await registryDead()).toBe(0);
    const lines = fx.rt.logger.lines.filter((l) => l.executorId === 'exec-nokit');
    expect(lines.some((l) => l.event === 'executor_not_dead')).toBe(true);
    expect(lines.some((l) => l.event === 'executor_dead')).toBe(false);
  });

  it('recovered once it has no session and quiet workflows; a checkpoint landing before the UPDATE keeps that one', async () => {
    const { tdb } = fx;
    faults.on('reaper.beforeDeclareDead', async () => {
      await tdb.sql.query(
        `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms)
         VALUES ('nokit-1', 0, 'step-0', (EXTRACT(EPOCH FROM now())*1000)::bigint, (EXTRACT(EPOCH FROM now())*1000)::bigint)`,
      );
    });
    const first = await tick(fx.rt);
    expect(first.declaredDead).toEqual([]); // absent on one tick only
    const second = await tick(fx.rt);
    faults.off('reaper.beforeDeclareDead');
    expect(second.declaredDead).toEqual(['exec-nokit']);
    expect(second.passes.dead.reenqueued).toBe(1);
    await waitFor('exec-live claims the quiet workflow', async () => {
      const s = await state();
      return s[0]?.[2] === 'exec-nokit' && s[0]?.[1] === 'PENDING' && s[1]?.[2] === 'exec-live';
    });
    const audit = await tdb.sql.query(`SELECT workflow_ids FROM afterlife.recovery_batches`);
    expect(audit.rows.flatMap((r: { workflow_ids: string[] }) => r.workflow_ids)).toEqual(['nokit-2']);
    expect(await registryDead()).toBe(1);
  });
});
