import * as ff from '@google-cloud/functions-framework';
import { currentLogger, runtimeOr503 } from '../runtime.js';
import { installJsonFinalHandler } from '../transport.js';
import { type DeathOutcome, deathLog, decodeDeathEvent, handleDecodedDeath } from './handle.js';
import { readDelivery } from './transport.js';

installJsonFinalHandler();

/**
 * Registration only. An HTTP function rather than `ff.cloudEvent`, so the transport is ours to check
 * (method, media type, CloudEvent attributes) and every answer is JSON. Eventarc acks on 2xx and
 * redelivers on anything else: 204 for an acked notice (recovered, poison, refused), 503 for a nack.
 */
ff.http('executorDeath', async (req: ff.Request, res: ff.Response) => {
  const delivery = readDelivery({ method: req.method, headers: req.headers, body: req.body });
  if (!delivery.ok) {
    res.status(delivery.status).json(delivery.body);
    return;
  }
  const meta = { ...(delivery.id ? { eventId: delivery.id } : {}), traceparent: delivery.traceparent };
  const decoded = decodeDeathEvent(delivery.data, deathLog(undefined, meta, currentLogger()));
  if (!decoded.ok) {
    res.status(204).end();
    return;
  }
  const rt = await runtimeOr503(res);
  if (!rt) return;
  const outcome = await handleDecodedDeath(rt, decoded.message, meta).catch((err: unknown): DeathOutcome => {
    // handleDecodedDeath decides ack/nack itself; reaching here is a bug, and a nack loses nothing.
    rt.logger.error('death notice handling threw; nacked', { event: 'recovery_retry', err, code: 'internal' });
    return { ack: false, kind: 'retry', reason: 'internal error', code: 'internal' };
  });
  if (outcome.ack) res.status(204).end();
  else res.status(503).json({ error: outcome.reason, code: outcome.code });
});
