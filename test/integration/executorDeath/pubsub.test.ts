import { PubSub } from '@google-cloud/pubsub';
import { describe, expect, inject, it } from 'vitest';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Message } from '@google-cloud/pubsub';
import { ensureSubscription, startPullBridge, type Bridge } from '../../../shared/events/bridge.js';
import { DeathNotice, deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { PubSubPublisher, publishDeathNotice } from '../../../packages/executor/src/events/publisher.js';
import { silentLogger } from '../../../packages/executor/src/log.js';
import { beat, checkpointCount, pendingIds, waitAllSuccess } from '../../helpers/agents.js';
import { uniqueName, waitFor } from '../../helpers/db.js';
import { startExecutor } from '../../helpers/executor.js';
import { executorDeathFixture } from '../../helpers/executorDeath.js';

/** The pull delivery path end to end: publisher → real Pub/Sub emulator → pull-and-post bridge → served function → B completes. */
const emulatorHost = inject('pubsubEmulatorHost');
if (!emulatorHost) console.warn('!!! SKIPPED: executorDeath through the Pub/Sub emulator (emulator not installed)');

describe.skipIf(!emulatorHost)('executorDeath through the real Pub/Sub emulator', () => {
  let pubsub: PubSub;
  let bridge: Bridge;
  const topic = uniqueName('executor-deaths');
  const f = executorDeathFixture('app-h', {
    setup: async (f) => {
      pubsub = new PubSub({ projectId: 'afterlife-test', apiEndpoint: emulatorHost ?? '' });
      f.onClose(() => pubsub.close());
      bridge = await startPullBridge({ pubsub, topic, subscription: `${topic}-sub`, targetUrl: f.server.url, logger: silentLogger() });
      f.onClose(() => bridge.close());
    },
  });

  it('a published notice is delivered, acked and the workflows complete on a live executor', async () => {
    const a = await startExecutor({ databaseUrl: f.tdb.url, applicationName: f.app, applicationVersion: 'v1', executorId: 'exec-A' });
    f.executors.push(a);
    const ids = Array.from({ length: 6 }, (_, i) => `h-${i}`);
    for (const id of ids) await a.start(id, { steps: 4, stepMs: 300 });
    await waitFor('some checkpoints', async () => (await checkpointCount(f.tdb.sql)) >= 3);
    a.kill('SIGKILL');
    await a.exited;
    expect((await pendingIds(f.tdb.sql, 'exec-A')).length).toBeGreaterThan(0);

    const b = await startExecutor({ databaseUrl: f.tdb.url, applicationName: f.app, applicationVersion: 'v1', executorId: 'exec-B' });
    f.executors.push(b);
    if (f.rt.redis) await beat(f.rt.redis, f.app, 'exec-B', 'v1');

    // A second subscription on the topic sees the message as any subscriber would: attributes and ordering key.
    const tap = await ensureSubscription(pubsub, topic, `${topic}-tap`);
    const tapped = new Promise<Message>((resolve) => tap.once('message', (m: Message) => (m.ack(), resolve(m))));
    const messageId = await publishDeathNotice(
      new PubSubPublisher(pubsub),
      topic,
      deathNotice({ executorId: 'exec-A', applicationName: f.app, reason: 'manual', detectedBy: 'test' }),
    );
    expect(messageId).toBeTruthy();
    await waitAllSuccess(f.tdb.sql, ids);
    expect(bridge.delivered).toBeGreaterThanOrEqual(1);
    const audit = await f.tdb.sql.query<{ message_id: string; outcome: string }>(`SELECT message_id, outcome FROM afterlife.recoveries`);
    expect(audit.rows.some((r) => r.message_id === messageId && r.outcome === 'completed')).toBe(true);
    expect(await pendingIds(f.tdb.sql, 'exec-A')).toEqual([]);

    const m = await tapped;
    await tap.close();
    expect(m.id).toBe(messageId);
    expect(m.attributes).toEqual({ type: 'executor.dead', executorId: 'exec-A' });
    expect(m.orderingKey).toBe('exec-A');
    expect(DeathNotice.parse(JSON.parse(m.data.toString('utf8')))).toMatchObject({
      executorId: 'exec-A',
      applicationName: f.app,
      reason: 'manual',
    });
  });

  it('the bridge nacks a non-2xx answer and the message comes back until it is acked', async () => {
    const seen: string[] = [];
    const target = createServer((req, res) => {
      const id = String(req.headers['ce-id']);
      seen.push(id);
      res.statusCode = seen.filter((s) => s === id).length < 3 ? 503 : 204;
      req.resume().on('end', () => res.end());
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
    const flaky = uniqueName('executor-deaths-flaky');
    const b = await startPullBridge({
      pubsub,
      topic: flaky,
      subscription: `${flaky}-sub`,
      targetUrl: `http://127.0.0.1:${(target.address() as AddressInfo).port}/`,
      logger: silentLogger(),
    });
    try {
      const id = await publishDeathNotice(
        new PubSubPublisher(pubsub),
        flaky,
        deathNotice({ executorId: 'exec-F', applicationName: f.app, reason: 'manual', detectedBy: 'test' }),
      );
      await waitFor('acked on the third delivery', async () => b.delivered === 1);
      expect(seen.filter((s) => s === id)).toHaveLength(3);
    } finally {
      await b.close();
      await new Promise<void>((r) => target.close(() => r()));
    }
  });
});
