import { Admission } from '../../shared/db/admission.js';
import { classify } from '../../shared/errors.js';
import { InvalidInputError } from '../../shared/errors.js';
import { DeathNotice } from '../../shared/events/deathNotice.js';
import { forkDepsFromRuntime } from '../../shared/fork/deps.js';
import { forkOrphansToLatest } from '../../shared/fork/orphans.js';
import { decodePubSubJson } from '../../shared/events/pubsub.js';
import { budgetFrom } from '../../shared/lifecycle/deadline.js';
import { recoverExecutor, type RecoverySummary } from '../../shared/resume/recoverExecutor.js';
import { traceFields } from '../../shared/log.js';
import type { Runtime } from '../../shared/runtime.js';

/**
 * Decode → recover → map the outcome to ack or nack. The one place that decides: poison input is acked
 * with a logged reason (retrying can't fix it); everything else that fails is nacked so Pub/Sub redelivers.
 */
export type DeathOutcome =
  | { ack: true; kind: 'poison'; reason: string; issues: string[] }
  | { ack: true; kind: 'recovered'; summary: RecoverySummary }
  | { ack: false; kind: 'retry'; reason: string; code: string };

export interface DeliveryMeta {
  /** The CloudEvent's ID (Pub/Sub's message ID under Eventarc). */
  eventId?: string;
  /** W3C trace context Eventarc sets on the event, so the lines join the request's trace. */
  traceparent?: unknown;
}

export async function handleDeathEvent(rt: Runtime, body: unknown, meta: DeliveryMeta = {}): Promise<DeathOutcome> {
  const started = rt.clock();
  const log = rt.logger.child({ fn: 'executorDeath', eventId: meta.eventId, ...traceFields(rt.config.project, { traceparent: meta.traceparent }) });
  let decoded;
  try {
    decoded = decodePubSubJson(body, DeathNotice);
  } catch (err) {
    if (err instanceof InvalidInputError) {
      log.warn('poison death notice acked', { event: 'poison_message', reason: err.message, issues: err.issues });
      return { ack: true, kind: 'poison', reason: err.message, issues: err.issues };
    }
    throw err;
  }
  const notice = decoded.payload;
  if (notice.applicationName !== rt.config.applicationName) {
    const reason = `notice is for application ${notice.applicationName}; this deployment guards ${rt.config.applicationName}`;
    log.warn('foreign death notice acked', { event: 'poison_message', reason });
    return { ack: true, kind: 'poison', reason, issues: [] };
  }
  const budget = budgetFrom(started, rt.config.functionTimeoutS, rt.config.budgetMarginMs, rt.clock);
  let admitted: () => void;
  try {
    admitted = await admission(rt).enter(budget);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    log.warn('death notice nacked for redelivery', { event: 'recovery_retry', reason, code: 'db_busy' });
    return { ack: false, kind: 'retry', reason, code: 'db_busy' };
  }
  try {
    // Tracked: on SIGTERM the loop stops at a batch boundary and releases its lock before Redis closes.
    const summary = await rt.lifecycle.track(recoverExecutor(
      {
        db: rt.db,
        redis: rt.redis,
        lock: rt.lock,
        logger: log,
        faults: rt.faults,
        batchSize: rt.config.recovery.batchSize,
        lockTtlMs: rt.config.recovery.lockTtlMs,
        ...(rt.config.redis ? { keyPrefix: rt.config.redis.keyPrefix } : {}),
        ...(rt.config.recovery.orphanedVersionPolicy === 'fork-to-latest'
          ? { onOrphanedVersion: async (info) => void (await forkOrphansToLatest(forkDepsFromRuntime(rt, { logger: log }), info)) }
          : {}),
      },
      notice,
      {
        ...(decoded.messageId ? { messageId: decoded.messageId } : {}),
        budget,
        signal: rt.lifecycle.signal,
      },
    ));
    log.info('executor death handled', { event: 'recovery', ...summary, elapsedMs: rt.clock() - started });
    return { ack: true, kind: 'recovered', summary };
  } catch (err) {
    const disposition = classify(err);
    const code = (err as { code?: unknown }).code;
    const reason = err instanceof Error ? err.message : String(err);
    if (disposition === 'permanent') {
      log.error('death notice failed permanently; acked', { event: 'poison_message', reason, err });
      return { ack: true, kind: 'poison', reason, issues: [] };
    }
    log.warn('death notice nacked for redelivery', { event: 'recovery_retry', reason, code });
    return { ack: false, kind: 'retry', reason, code: typeof code === 'string' ? code : 'error' };
  } finally {
    admitted();
  }
}

/** One admission line per runtime (see Admission): as many recoveries at once as the instance has database slots. */
const admissions = new WeakMap<Runtime, Admission>();
function admission(rt: Runtime): Admission {
  let a = admissions.get(rt);
  if (!a) {
    a = new Admission(rt.db.budget.limit, { signal: rt.lifecycle.signal });
    admissions.set(rt, a);
  }
  return a;
}
