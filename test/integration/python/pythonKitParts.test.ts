import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { insertDrainRequests } from '../../../packages/executor/src/db/queries/drainRequests.js';
import { setState } from '../../../packages/executor/src/db/queries/executors.js';
import { waitAllSuccess } from '../../helpers/agents.js';
import { unattributedSessions } from '../../../shared/dbos/reaper.js';
import { afterlifeDb, uniqueName, waitFor } from '../../helpers/db.js';
import { kitEnv } from '../../helpers/kit.js';
import { type Plane, startPlane } from '../../helpers/plane.js';
import { type PythonExecutor, pythonSkip, startPythonExecutor } from '../../helpers/pythonExecutor.js';

/**
 * The Python kit's parts one by one, on a real DBOS for Python 2.30.0 app (test/fixtures/python/kit_app.py):
 *
 *   - what it records for doctor (kit facts: its version, DBOS's, the lease the server reports on its own
 *     liveness session, that recoveries may ask it to claim now) and its liveness session's name and lease;
 *   - watched-or-told: no plane guards its application, so it says so at WARNING naming the fix;
 *   - DBOS's shared default executor ID `local` is refused (exit 78, naming the fix);
 *   - self-fencing: declared dead by someone else while alive, it exits 75 within about a second;
 *   - a planned drain request: intake stops, work finishes, the registry and the beat say `drained`;
 *   - a second SIGTERM skips the in-flight wait and hands over at once;
 *   - the death notice on Cloud Run's path: project and access token from the metadata server (a FAKE one,
 *     the only thing faked), published over REST to the real emulator, recovered by the served executorDeath.
 */
const noPython = pythonSkip("the Python kit's parts on a real DBOS for Python app");
const emulatorHost = inject('pubsubEmulatorHost');

describe.skipIf(noPython)("the Python kit's parts", () => {
  let plane: Plane;
  const app = uniqueName('py-parts');
  const topic = uniqueName('executor-deaths');
  const started: PythonExecutor[] = [];
  let metadata: Server | undefined;
  const metadataSeen: IncomingHttpHeaders[] = [];

  const py = async (executorId: string, env: Record<string, string> = kitEnv({ ttlMs: 15_000 })): Promise<PythonExecutor> => {
    const e = await startPythonExecutor({ databaseUrl: plane.tdb.url, applicationName: app, executorId, env });
    started.push(e);
    return e;
  };

  beforeAll(async () => {
    plane = await startPlane({ app, target: 'executorDeath', topic, emulatorHost });
  });
  afterAll(async () => {
    await Promise.all(started.map((e) => e.stop()));
    metadata?.close();
    await plane?.close();
  });

  it('records its facts and lease for doctor, names its liveness session, and warns that no plane guards it', async () => {
    const e = await py('py-facts');
    const row = await waitFor('kit facts recorded', async () => {
      const r = await plane.tdb.sql.query<{ kit_facts: Record<string, unknown> | null; incarnation: string; liveness: boolean }>(
        `SELECT kit_facts, incarnation, liveness FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'py-facts'`,
        [app],
      );
      return r.rows[0]?.kit_facts ? r.rows[0] : undefined;
    });
    expect(row.liveness).toBe(true);
    expect(row.kit_facts).toMatchObject({
      incarnation: row.incarnation,
      kitVersion: '0.1.0',
      dbosVersion: '2.30.0',
      dbosSdk: 'python',
      livenessLeaseMs: 8_000,
      pollsOnRequest: true,
    });
    const session = await plane.tdb.sql.query<{ application_name: string }>(
      `SELECT application_name FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'afterlife_live_py-facts@%'`,
    );
    expect(session.rows.map((r) => r.application_name)).toEqual([`afterlife_live_py-facts@${row.incarnation}`]);
    // DBOS's own sessions name this executor (DBOS for Python calls them all `dbos_transact`), but for the
    // notification listener's, opened at launch, which the kit records as its own: the plane sees none that
    // names nobody, so executors without the kit elsewhere in the database stay judged.
    const pids = (row.kit_facts?.dbosSessionPids ?? []) as number[];
    expect(pids.length).toBe(1);
    await waitFor("DBOS's sessions named after the executor", async () => {
      const r = await plane.tdb.sql.query<{ application_name: string; pid: number }>(
        `SELECT application_name, pid FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'dbos_transact%'`,
      );
      return r.rows.length > 1 && r.rows.every((x) => x.application_name === 'dbos_transact_py-facts_v1' || pids.includes(x.pid));
    });
    const db = afterlifeDb(plane.tdb.url);
    try {
      expect(await unattributedSessions(db)).toEqual([]);
    } finally {
      await db.end();
    }
    // No reaper runs in this file: nobody guards the application, and the kit must say so (after its 10 s grace).
    await waitFor('the kit_unwatched warning', async () => /"event": "kit_unwatched"/.test(e.output.join('')), { timeoutMs: 25_000 });
    expect(e.output.join('')).toMatch(/"severity": "WARNING", "message": "no plane guards application/);
    expect(e.output.join('')).toMatch(/DBOS_APPLICATION_NAME=/);
  }, 60_000);

  it("refuses DBOS's shared default executor ID `local`: exits 78 naming the fix", async () => {
    await expect(
      startPythonExecutor({ databaseUrl: plane.tdb.url, applicationName: app, executorId: 'local', env: kitEnv({ ttlMs: 15_000 }) }),
    ).rejects.toThrow(/exited before ready[\s\S]*shared default[\s\S]*DBOS__VMID[\s\S]*"exitCode": 78, "event": "kit_attach_failed"/);
  }, 60_000);

  it('declared dead by someone else while alive: exits 75 within about a second', async () => {
    const e = await py('py-zombie');
    const inc = await plane.tdb.sql.query<{ incarnation: string }>(
      `SELECT incarnation FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'py-zombie'`,
      [app],
    );
    const t0 = Date.now();
    await setState(plane.rt.db, {
      applicationName: app,
      executorId: 'py-zombie',
      state: 'dead',
      reason: 'manual',
      detectedBy: 'test',
      ...(inc.rows[0] ? { incarnation: inc.rows[0].incarnation } : {}),
    });
    const exit = await e.exited;
    const ms = Date.now() - t0;
    expect(exit, e.output.join('')).toEqual({ code: 75, signal: null });
    expect(e.output.join('')).toMatch(/"event": "executor_fenced"/);
    console.log(`[python fence] declared dead → exit 75 in ${ms} ms`);
    expect(ms).toBeLessThan(3_000);
  }, 60_000);

  it('a planned drain request: intake stops, work finishes, registry and beat say drained', async () => {
    const e = await py('py-drain');
    await e.start('d-1', { steps: 2, stepMs: 1_000 });
    await insertDrainRequests(plane.rt.db, {
      applicationName: app,
      target: { executorIds: ['py-drain'] },
      budgetMs: 10_000,
      requestedBy: 'test',
    });
    await waitFor(
      'the registry says drained',
      async () =>
        (
          await plane.tdb.sql.query(
            `SELECT 1 FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'py-drain' AND state = 'drained'`,
            [app],
          )
        ).rowCount === 1,
      { timeoutMs: 20_000 },
    );
    await waitAllSuccess(plane.tdb.sql, ['d-1'], 5_000);
    const beat = JSON.parse((await plane.rt.redis?.get(heartbeatKey(app, 'py-drain'))) ?? '{}') as { state?: string };
    expect(beat.state).toBe('drained');
    // Drained with nothing left: it stays up, idle (exit only when work outlived the budget).
    expect(await Promise.race([e.exited.then(() => 'exited'), new Promise((r) => setTimeout(() => r('up'), 1_000))])).toBe('up');
  }, 60_000);

  it('a second SIGTERM skips the in-flight wait and hands over at once', async () => {
    const e = await py('py-fast', kitEnv({ ttlMs: 15_000, topic, emulatorHost }));
    await e.start('f-1', { steps: 3, stepMs: 3_000 });
    await waitFor('the step runs', async () => {
      const r = await plane.tdb.sql.query(`SELECT 1 FROM public.step_runs WHERE workflow_id = 'f-1'`);
      return (r.rowCount ?? 0) > 0;
    });
    e.kill('SIGTERM');
    await waitFor('the kit is draining', async () => /"event": "executor_draining"/.test(e.output.join('')), {
      timeoutMs: 5_000,
      intervalMs: 20,
    });
    const second = Date.now();
    e.kill('SIGTERM');
    const exit = await e.exited;
    const ms = Date.now() - second;
    expect(exit, e.output.join('')).toEqual({ code: 0, signal: null });
    expect(e.output.join('')).toMatch(/second SIGTERM: fast path/);
    console.log(`[python fast path] second SIGTERM → exit ${ms} ms`);
    // The slow path would wait 6.5 s for the 3 s steps; the fast path leaves after the hand-over.
    expect(ms).toBeLessThan(3_000);
    if (emulatorHost) expect(e.output.join('')).toMatch(/"event": "death_notice_published"/);
  }, 60_000);

  it.skipIf(!emulatorHost)(
    "SIGTERM on Cloud Run's path: project and token from the metadata server, the notice over REST",
    async () => {
      metadata = createServer((req, res) => {
        metadataSeen.push(req.headers);
        if (req.headers['metadata-flavor'] !== 'Google') {
          res.writeHead(403).end();
          return;
        }
        res.setHeader('Metadata-Flavor', 'Google');
        if (req.url === '/computeMetadata/v1/project/project-id') res.end('afterlife-test');
        else if (req.url === '/computeMetadata/v1/instance/service-accounts/default/token')
          res.end(JSON.stringify({ access_token: 'fake-token', expires_in: 3600, token_type: 'Bearer' }));
        else res.writeHead(404).end();
      });
      await new Promise<void>((r) => metadata?.listen(0, '127.0.0.1', r));
      const host = `127.0.0.1:${(metadata.address() as AddressInfo).port}`;
      const env = {
        ...kitEnv({ ttlMs: 15_000 }),
        AFTERLIFE_PUBLISH: 'pubsub',
        GOOGLE_CLOUD_PROJECT: '',
        EXECUTOR_DEATH_TOPIC: topic,
        GCE_METADATA_HOST: host,
        AFTERLIFE_PUBSUB_ENDPOINT: `http://${emulatorHost}`,
      };
      const victim = await py('py-cloudrun', env);
      await py('py-cloudrun-survivor', env);
      expect(victim.output.join('')).toMatch(/"deathNotices": "rest"/);
      await victim.start('cr-1', { steps: 3, stepMs: 3_000 });
      await waitFor('the step runs', async () => {
        const r = await plane.tdb.sql.query(`SELECT 1 FROM public.step_runs WHERE workflow_id = 'cr-1'`);
        return (r.rowCount ?? 0) > 0;
      });
      victim.kill('SIGTERM');
      expect(await victim.exited, victim.output.join('')).toEqual({ code: 0, signal: null });
      expect(victim.output.join('')).toMatch(/"event": "death_notice_published"/);
      await waitAllSuccess(plane.tdb.sql, ['cr-1'], 60_000);
      const audit = await plane.tdb.sql.query<{ reason: string }>(
        `SELECT reason FROM afterlife.recoveries WHERE executor_id = 'py-cloudrun'`,
      );
      expect(audit.rows.map((r) => r.reason)).toContain('sigterm');
      expect(metadataSeen.length).toBeGreaterThan(0);
      expect(metadataSeen.every((h) => h['metadata-flavor'] === 'Google')).toBe(true);
    },
    90_000,
  );
});
