import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/db.js';
import { startReaper, waitForLock } from '../../helpers/detection.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';

/**
 * Issue 31: a recovery asks live executors to claim what it re-enqueued now (packages/executor/src/contract/requeued.ts),
 * instead of leaving it for their next queue poll. Real DBOS executors with the kit; the app's queues poll
 * every 120 s once the victim has claimed its work, so a survivor started after that would first poll them
 * two minutes later: work that runs on it within seconds of the kill ran because it was asked. A queue with
 * `workerConcurrency` (flow control DBOS counts in-process) is not polled early: its recovered work waits
 * for DBOS's own poll, as before.
 */
const SLOW_POLL_SEC = 120;
/** The kill → first step bound: far below the 120 s poll, far above a loaded machine's detection (~2 s). */
const CLAIMED_WITHIN_MS = 20_000;
/** How long the flow-controlled queue's work must stay unclaimed after the other queue's ran. */
const LIMITED_WAITS_MS = 3_000;

describe('recovery: survivors claim re-enqueued work when asked, not at their next poll', () => {
  const fx = reaperFixture('app-claimnow', { env: { REAPER_TICK_MS: '250', FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' } });
  const stepsOn = async (executorId: string, ids: string[]) =>
    (
      await fx.tdb.sql.query<{ workflow_id: string; at: Date }>(
        `SELECT workflow_id, min(at) AS at FROM public.step_runs WHERE phase = 'start' AND executor_id = $1 AND workflow_id = ANY($2) GROUP BY 1`,
        [executorId, ids],
      )
    ).rows;

  it(
    'a survivor asked by the recovery runs the free queue’s work within seconds; the limited queue waits',
    { timeout: 120_000 },
    async () => {
      const queues = { free: { minPollingIntervalMs: 100 }, limited: { minPollingIntervalMs: 100, workerConcurrency: 5 } };
      const victim = await fx.executor('claim-victim', { beat: true, env: { AGENT_QUEUES: JSON.stringify(queues) } });
      await waitForLock(fx.tdb.sql, fx.app, 'claim-victim');
      const free = ['free-1', 'free-2'];
      const limited = ['limited-1'];
      for (const id of free) await victim.start(id, { steps: 2, stepMs: 4_000 }, 'free');
      for (const id of limited) await victim.start(id, { steps: 2, stepMs: 4_000 }, 'limited');
      await waitFor('the victim runs every workflow', async () => (await stepsOn('claim-victim', [...free, ...limited])).length === 3);

      // From now on DBOS polls both queues every two minutes, in every executor (the queues table is shared).
      await fx.tdb.sql.query(`UPDATE dbos.queues SET polling_interval_sec = $1 WHERE name IN ('free', 'limited')`, [SLOW_POLL_SEC]);
      // The survivor registers no queue of its own (that would write its interval back): it finds both in the table.
      const survivor = await fx.executor('claim-survivor', { beat: true });
      await waitForLock(fx.tdb.sql, fx.app, 'claim-survivor');
      await waitFor('the survivor’s kit says it can be asked', async () => {
        const r = await fx.tdb.sql.query<{ yes: boolean }>(
          `SELECT kit_facts @> '{"pollsOnRequest": true}' AS yes FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'claim-survivor'`,
          [fx.app],
        );
        return r.rows[0]?.yes === true;
      });

      const reaper = startReaper(testReaperDeps(fx.rt));
      try {
        const killedAt = Date.now();
        victim.kill('SIGKILL');
        await victim.exited;
        const ran = await waitFor(
          'the free queue’s work on the survivor',
          async () => {
            const r = await stepsOn('claim-survivor', free);
            return r.length === free.length ? r : undefined;
          },
          { timeoutMs: CLAIMED_WITHIN_MS + 5_000 },
        );
        const lastMs = Math.max(...ran.map((r) => r.at.getTime())) - killedAt;
        expect(lastMs).toBeLessThan(CLAIMED_WITHIN_MS);

        // The same recovery re-enqueued the limited queue's work; nobody may poll that queue early.
        await waitFor('the limited queue’s work re-enqueued', async () => {
          const r = await fx.tdb.sql.query<{ status: string }>(`SELECT status FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`, [
            limited,
          ]);
          return r.rows.length === limited.length && r.rows.every((x) => x.status === 'ENQUEUED');
        });
        await new Promise((r) => setTimeout(r, LIMITED_WAITS_MS));
        const still = await fx.tdb.sql.query<{ status: string }>(`SELECT status FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`, [
          limited,
        ]);
        expect(still.rows.map((x) => x.status)).toEqual(['ENQUEUED']);
        expect(await stepsOn('claim-survivor', limited)).toEqual([]);
        expect(survivor.child.exitCode).toBeNull();
      } finally {
        await reaper.stop().catch(() => undefined);
      }
    },
  );
});
