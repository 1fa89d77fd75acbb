import { Admission } from '../../shared/db/admission.js';
import {
  classify,
  DeathNotice,
  errorMessage,
  InvalidInputError,
  type Logger,
  traceFields,
} from '../../packages/executor/src/plane/index.js';
import { type DecodedMessage, decodePubSubJson } from '../../shared/events/pubsub.js';
import { budgetFrom } from '../../shared/lifecycle/deadline.js';
import { recoveryDeps } from '../../shared/recovery/deps.js';
import { recoverExecutor, type RecoverySummary } from '../../shared/recovery/recoverExecutor.js';
import { verifyNotice } from '../../shared/recovery/verifyNotice.js';
import type { Runtime } from '../../shared/runtime.js';

/**
 * Decode → recover → map the outcome to ack or nack. The one place that decides: poison input is acked
 * with a logged reason (retrying can't fix it); everything else that fails is nacked so Pub/Sub redelivers.
 */
export type DeathOutcome =
  | { ack: true; kind: 'poison'; reason: string; issues: string[] }
  | { ack: true; kind: 'refused'; reason: string }
  | { ack: true; kind: 'recovered'; summary: RecoverySummary }
  | { ack: false; kind: 'retry'; reason: string; code: string };

export interface DeliveryMeta {
  /** The CloudEvent's ID (Pub/Sub's message ID under Eventarc). */
  eventId?: string;
  /** W3C trace context Eventarc sets on the event, so the lines join the request's trace. */
  traceparent?: unknown;
}

export type Decoded = { ok: true; message: DecodedMessage<DeathNotice> } | { ok: false; outcome: DeathOutcome & { kind: 'poison' } };

/**
 * Decoding needs nothing but the body, so it runs before the runtime is awaited: a poison message is
 * acked even while Postgres is down, instead of being nacked with everything else until it dead-letters.
 */
export function decodeDeathEvent(body: unknown, log: Logger): Decoded {
  try {
    return { ok: true, message: decodePubSubJson(body, DeathNotice) };
  } catch (err) {
    if (err instanceof InvalidInputError) {
      log.warn('poison death notice acked', { event: 'poison_message', reason: err.message, issues: err.issues });
      return { ok: false, outcome: { ack: true, kind: 'poison', reason: err.message, issues: err.issues } };
    }
    throw err;
  }
}

export function deathLog(
  rt: { logger: Logger; config: { project: string | undefined } } | undefined,
  meta: DeliveryMeta,
  fallback?: Logger,
): Logger {
  const base = rt?.logger ?? fallback;
  if (!base) throw new Error('deathLog needs a runtime or a fallback logger');
  return base.child({ fn: 'executorDeath', eventId: meta.eventId, ...traceFields(rt?.config.project, { traceparent: meta.traceparent }) });
}

export async function handleDecodedDeath(
  rt: Runtime,
  decoded: DecodedMessage<DeathNotice>,
  meta: DeliveryMeta = {},
): Promise<DeathOutcome> {
  const started = rt.clock();
  const log = deathLog(rt, meta);
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
    const reason = errorMessage(err);
    log.warn('death notice nacked for redelivery', { event: 'recovery_retry', reason, code: 'db_busy' });
    return { ack: false, kind: 'retry', reason, code: 'db_busy' };
  }
  try {
    // After admission: its read is a database statement too, and must not take a slot an admitted delivery needs.
    // The notice is a claim (shared/recovery/verifyNotice.ts): held against the plane's own records first.
    const verdict = await verifyNotice(
      {
        db: rt.db,
        redis: rt.redis,
        heartbeatIntervalMs: rt.config.heartbeatIntervalMs,
        clock: rt.clock,
        ...(rt.config.redis ? { keyPrefix: rt.config.redis.keyPrefix } : {}),
      },
      notice,
    );
    if (verdict.refused !== undefined && verdict.redeliver) {
      log.warn('death notice about an executor that still beats: nacked for redelivery', {
        event: 'death_notice_refused',
        executorId: notice.executorId,
        reason: verdict.refused,
        noticeReason: notice.reason,
        redeliver: true,
      });
      return { ack: false, kind: 'retry', reason: verdict.refused, code: 'heartbeat_alive' };
    }
    if (verdict.refused !== undefined) {
      const msg = verdict.unknown
        ? 'death notice about an unknown executor refused (acked, nothing written)'
        : 'death notice about a live executor refused (acked)';
      log.warn(msg, { event: 'death_notice_refused', executorId: notice.executorId, reason: verdict.refused, noticeReason: notice.reason });
      return { ack: true, kind: 'refused', reason: verdict.refused };
    }
    // Tracked: on SIGTERM the loop stops at a batch boundary and releases its lock before Redis closes.
    const summary = await rt.lifecycle.track(
      recoverExecutor(recoveryDeps({ ...rt, logger: log }, { via: 'executorDeath', runtime: rt }), notice, {
        ...(decoded.messageId ? { messageId: decoded.messageId } : {}),
        budget,
        signal: rt.lifecycle.signal,
        livenessTracked: verdict.livenessTracked,
      }),
    );
    log.info('executor death handled', { event: 'recovery', ...summary, elapsedMs: rt.clock() - started });
    return { ack: true, kind: 'recovered', summary };
  } catch (err) {
    const disposition = classify(err);
    const code = (err as { code?: unknown }).code;
    const reason = errorMessage(err);
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
