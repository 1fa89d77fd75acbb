import * as ff from '@google-cloud/functions-framework';
import { type Message, PubSub } from '@google-cloud/pubsub';
import { describe, expect, inject, it } from 'vitest';
import { ensurePushSubscription } from '../../../scripts/stack/push.js';
import { ensureSubscription } from '../../../shared/events/bridge.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { PubSubPublisher, publishDeathNotice } from '../../../packages/executor/src/events/publisher.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { serve } from '../../helpers/cloudEvents.js';
import { uniqueName, waitFor } from '../../helpers/db.js';
import { knownExecutors } from '../../helpers/agents.js';
import { executorDeathFixture } from '../../helpers/executorDeath.js';

/**
 * The production delivery path (infra/pubsub.tf): a push subscription with a dead-letter policy, POSTing
 * raw push bodies to the served executorDeath function at /projects/<p>/topics/<t>, where
 * functions-framework turns them into the CloudEvent the handler takes. The real Pub/Sub emulator does
 * the pushing, redelivering and dead-lettering. A notice that keeps failing (every database query fails,
 * injected at db.beforeQuery) reaches the dead-letter topic after maxDeliveryAttempts; poison is acked
 * at once and never dead-lettered; once the database is back a notice is recovered on first delivery.
 */
const emulatorHost = inject('pubsubEmulatorHost');
if (!emulatorHost) console.warn('!!! SKIPPED: executorDeath through a Pub/Sub push subscription (emulator not installed)');

const MAX_ATTEMPTS = 5;

describe.skipIf(!emulatorHost)('executorDeath behind a push subscription with dead-lettering', () => {
  let pubsub: PubSub;
  const faults = new FaultInjector();
  const topic = uniqueName('executor-deaths');
  const dlq = `${topic}-dead-letter`;
  const dead: Message[] = [];
  const f = executorDeathFixture('app-push', {
    redis: 'none',
    faults,
    setup: async (f) => {
      await knownExecutors(f.tdb.sql, f.app, ['exec-gone', 'exec-ok']);
      pubsub = new PubSub({ projectId: 'afterlife-test', apiEndpoint: emulatorHost ?? '' });
      f.onClose(() => pubsub.close());
      await ensurePushSubscription(pubsub, {
        topic,
        subscription: `${topic}-push`,
        functionUrl: f.server.url,
        deadLetterTopic: dlq,
        maxDeliveryAttempts: MAX_ATTEMPTS,
        minimumBackoffS: 0,
        maximumBackoffS: 1,
        ackDeadlineSeconds: 10,
      });
      const hold = await ensureSubscription(pubsub, dlq, `${dlq}-hold`);
      hold.on('message', (m: Message) => {
        m.ack();
        dead.push(m);
      });
    },
  });

  const publisher = () => new PubSubPublisher(pubsub);
  const linesFor = (event: string, messageId: string) => f.rt.logger.lines.filter((l) => l.event === event && l.eventId === messageId);

  it('dead-letters a notice that keeps failing after maxDeliveryAttempts, and acks poison at once', async () => {
    faults.on('db.beforeQuery', () => {
      throw new Error('injected: database unreachable');
    });
    const failing = await publishDeathNotice(
      publisher(),
      topic,
      deathNotice({ executorId: 'exec-gone', applicationName: f.app, reason: 'manual', detectedBy: 'test' }),
    );
    const poison = await pubsub.topic(topic).publishMessage({
      data: Buffer.from('{"type":"executor.dead","version":1}'),
      attributes: { type: 'executor.dead', executorId: 'x' },
    });

    const letter = await waitFor(
      'the failing notice on the dead-letter topic',
      async () => dead.find((m) => m.attributes.CloudPubSubDeadLetterSourceDeliveryCount !== undefined),
      { timeoutMs: 45_000 },
    );
    expect(JSON.parse(letter.data.toString())).toMatchObject({ executorId: 'exec-gone', applicationName: f.app });
    expect(letter.attributes).toMatchObject({ executorId: 'exec-gone', CloudPubSubDeadLetterSourceDeliveryCount: String(MAX_ATTEMPTS) });
    // Each delivery reached the handler as a CloudEvent with the message's ID, and was nacked.
    expect(linesFor('recovery_retry', failing)).toHaveLength(MAX_ATTEMPTS);

    // Poison: one delivery, acked with the reason, never dead-lettered.
    expect(linesFor('poison_message', poison)).toHaveLength(1);
    expect(dead.filter((m) => m.attributes.executorId === 'x')).toEqual([]);
    expect(dead).toHaveLength(1);
  });

  it('hands the function what functions-framework makes of a raw push body (the evidence for the switch)', async () => {
    const seen: Array<ff.CloudEvent<unknown>> = [];
    ff.cloudEvent('pushProbe', (ev: ff.CloudEvent<unknown>) => {
      seen.push(ev);
    });
    const probe = await serve('pushProbe');
    try {
      const probeTopic = uniqueName('push-probe');
      await ensurePushSubscription(pubsub, {
        topic: probeTopic,
        subscription: `${probeTopic}-push`,
        functionUrl: probe.url,
        deadLetterTopic: `${probeTopic}-dlq`,
        maxDeliveryAttempts: 5,
      });
      const id = await pubsub.topic(probeTopic).publishMessage({ json: { hello: 1 }, attributes: { executorId: 'e1' }, orderingKey: 'e1' });
      const ev = await waitFor('the probe event', async () => seen[0]);
      expect(ev).toMatchObject({
        id,
        type: 'google.cloud.pubsub.topic.v1.messagePublished',
        source: `//pubsub.googleapis.com/projects/afterlife-test/topics/${probeTopic}`,
      });
      const data = ev.data as { message: Record<string, unknown>; subscription?: unknown; deliveryAttempt?: unknown };
      expect(data.message).toMatchObject({
        messageId: id,
        attributes: { executorId: 'e1' },
        data: Buffer.from('{"hello":1}').toString('base64'),
      });
      // The conversion keeps message data, attributes, ID and publish time; it drops these, so the handler
      // must not depend on them (it does not: Pub/Sub itself counts attempts and dead-letters).
      expect(data.subscription).toBeUndefined();
      expect(data.deliveryAttempt).toBeUndefined();
      expect(data.message.orderingKey).toBeUndefined();
    } finally {
      await probe.close();
    }
  });

  it('recovers a notice on its first delivery once the database answers', async () => {
    faults.off('db.beforeQuery');
    const ok = await publishDeathNotice(
      publisher(),
      topic,
      deathNotice({ executorId: 'exec-ok', applicationName: f.app, reason: 'manual', detectedBy: 'test' }),
    );
    await waitFor('the recovery', async () => linesFor('recovery', ok).length > 0, { timeoutMs: 20_000 });
    const audit = await f.tdb.sql.query<{ message_id: string }>(
      `SELECT message_id FROM afterlife.recoveries WHERE executor_id = 'exec-ok'`,
    );
    expect(audit.rows.map((r) => r.message_id)).toEqual([ok]);
    expect(linesFor('recovery_retry', ok)).toEqual([]);
  });
});
