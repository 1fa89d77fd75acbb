import * as ff from '@google-cloud/functions-framework';
import { getRuntime } from '../runtime.js';
import { handleDeathEvent } from './handle.js';

/** Registration only. Throwing makes functions-framework answer 500, which Eventarc treats as a nack. */
ff.cloudEvent('executorDeath', async (event: ff.CloudEvent<unknown>) => {
  const rt = await getRuntime();
  const outcome = await handleDeathEvent(rt, event.data, { eventId: event.id, traceparent: (event as { traceparent?: unknown }).traceparent });
  if (!outcome.ack) throw new RetryLater(outcome.reason);
});

class RetryLater extends Error {
  override name = 'RetryLater';
}
