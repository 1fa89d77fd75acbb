import { PubSub } from '@google-cloud/pubsub';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { useRuntime } from '../../../functions/runtime.js';
import '../../../functions/index.js';
import { type Bridge, startPullBridge } from '../../../shared/events/bridge.js';
import { PubSubPublisher } from '../../../packages/executor/src/events/publisher.js';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { silentLogger } from '../../../packages/executor/src/log.js';
import { runReaper } from '../../../shared/reaper/index.js';
import { serve } from '../../helpers/cloudEvents.js';
import { uniqueName, waitFor, workflowRows } from '../../helpers/db.js';
import { backdateSentinel, reaperFixture, testReaperDeps } from '../../helpers/reaper.js';

/**
 * The production path of a reaper-detected death: the reaper publishes a `heartbeat-lapsed` death notice
 * on the real Pub/Sub emulator, the pull bridge (Eventarc's stand-in) delivers it to the served
 * executorDeath function, which recovers the executor. And when publishing fails, the reaper recovers
 * inline. Absence is backdated instead of waited for.
 */
const emulatorHost = inject('pubsubEmulatorHost');
if (!emulatorHost) console.warn('\n!!! Pub/Sub emulator not available: the reaper publish suite is SKIPPED\n');

describe.skipIf(!emulatorHost)('reaper: death notices through Pub/Sub', () => {
  const fx = reaperFixture('app-pub');
  const topic = uniqueName('executor-deaths');
  let pubsub: PubSub;
  let bridge: Bridge;
  let server: Awaited<ReturnType<typeof serve>>;

  /** Its lock free and its key gone for 10 s, seen on one tick (Redis kept its keys): the next tick declares it. */
  const makeAbsent = async (executorId: string) => {
    await backdateSentinel(fx.rt);
    await fx.tdb.sql.query(
      `UPDATE afterlife.executor_observations SET evidence = 'liveness', first_absent_at = now() - interval '10 s',
              last_absent_at = now(), absent_ticks = 1 WHERE application_name = $1 AND executor_id = $2`,
      [fx.app, executorId],
    );
  };
  /** REAPER_RECOVERY=notice: the reaper publishes and executorDeath recovers (the default recovers inline). */
  const deps = (topicName: string) =>
    testReaperDeps(fx.rt, {
      publisher: new PubSubPublisher(pubsub),
      config: {
        ...fx.rt.config,
        topics: { ...fx.rt.config.topics, executorDeaths: topicName },
        reaper: { ...fx.rt.config.reaper, recovery: 'notice' },
      },
    });
  /** Starts an executor with the kit running two long workflows, lets the reaper see it beat, SIGKILLs it. */
  const victim = async (executorId: string, ids: string[]) => {
    const e = await fx.executor(executorId, { beat: true });
    for (const id of ids) await e.start(id, { steps: 2, stepMs: 30_000 });
    await waitFor('PENDING on the victim', async () => (await workflowRows(fx.tdb.sql, ids)).every((r) => r.executor_id === executorId));
    await runReaper(testReaperDeps(fx.rt), { maxTicks: 1 });
    e.kill('SIGKILL');
    await e.exited;
    await fx.rt.redis?.del(heartbeatKey(fx.app, executorId)); // its TTL lapsing, without the wait
    await runReaper(testReaperDeps(fx.rt), { maxTicks: 1 }); // first absent observation
    await makeAbsent(executorId);
  };

  beforeAll(async () => {
    useRuntime(fx.rt);
    server = await serve('executorDeath');
    pubsub = new PubSub({ projectId: 'afterlife-test', apiEndpoint: emulatorHost ?? '' });
    bridge = await startPullBridge({ pubsub, topic, subscription: `${topic}-sub`, targetUrl: server.url, logger: silentLogger() });
    await fx.executor('exec-survivor', { beat: true });
  });
  afterAll(async () => {
    await bridge?.close();
    await pubsub?.close();
    await server?.close();
  });

  it('publishes a heartbeat-lapsed notice that executorDeath turns into a recovery', async () => {
    const ids = ['pub-1', 'pub-2'];
    await victim('exec-victim', ids);
    const s = await runReaper(deps(topic), { maxTicks: 1 });
    if (s.outcome !== 'completed') throw new Error('skipped');
    expect(s.declaredDead).toEqual(['exec-victim']);
    expect(s.passes.dead.published).toBe(1);
    expect(s.passes.dead.recoveredInline).toBe(0);
    await waitFor(
      'the survivor claims both',
      async () => (await workflowRows(fx.tdb.sql, ids)).every((r) => r.executor_id === 'exec-survivor'),
      { timeoutMs: 30_000 },
    );
    const audit = await fx.tdb.sql.query(`SELECT executor_id, reason, detected_by, reenqueued FROM afterlife.recoveries`);
    expect(audit.rows).toEqual([{ executor_id: 'exec-victim', reason: 'heartbeat-lapsed', detected_by: 'reaper-test', reenqueued: 2 }]);
    // Declared once: the next tick does not publish again.
    const again = await runReaper(deps(topic), { maxTicks: 1 });
    expect(again.outcome === 'completed' && again.passes.dead.published).toBe(0);
  });

  it('recovers inline when publishing fails', async () => {
    const ids = ['inline-1'];
    await victim('exec-victim-2', ids);
    const s = await runReaper(deps(uniqueName('no-such-topic')), { maxTicks: 1 });
    if (s.outcome !== 'completed') throw new Error('skipped');
    expect(s.declaredDead).toEqual(['exec-victim-2']);
    expect(s.passes.dead.published).toBe(0);
    expect(s.passes.dead.recoveredInline).toBe(1);
    expect(fx.rt.logger.lines.some((l) => l.message.startsWith('publishing the death notice failed'))).toBe(true);
    await waitFor(
      'the survivor claims it',
      async () => (await workflowRows(fx.tdb.sql, ids)).every((r) => r.executor_id === 'exec-survivor'),
      { timeoutMs: 30_000 },
    );
  });
});
