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
import { type Verdict, verifyNotice } from '../../shared/recovery/verifyNotice.js';
import type { Runtime } from '../../shared/runtime.js';

/**
 * Decode → recover → map the outcome to ack or nack. The one place that decides: poison input is acked
 * with a logged reason (retrying can't fix it); everything else that fails is nacked so Pub/Sub redelivers.
 * Each poison line (`event: poison_message`) carries its `cause`, so a dashboard tells them apart.
 */
export type DeathOutcome =
  /** The body is not a death notice (not JSON, bad base64, wrong shape): `issues` lists what is wrong. */
  | { ack: true; kind: 'poison'; cause: 'undecodable'; reason: string; issues: string[] }
  /** A well-formed notice about another application's executor: this deployment does not guard it. */
  | { ack: true; kind: 'poison'; cause: 'foreign-application'; reason: string }
  /** Handling failed in a way no redelivery can fix (classify() says permanent). */
  | { ack: true; kind: 'poison'; cause: 'permanent-failure'; reason: string }
  /** The plane's own records say the notice is wrong (verifyNotice.ts): an unknown executor, or one holding its lock. */
  | { ack: true; kind: 'refused'; verdict: 'unknown-executor' | 'lock-held'; reason: string }
  | { ack: true; kind: 'recovered'; summary: RecoverySummary }
  | { ack: false; kind: 'retry'; reason: string; code: string };

export type PoisonCause = Extract<DeathOutcome, { kind: 'poison' }>['cause'];

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
      log.warn('poison death notice acked', { event: 'poison_message', cause: 'undecodable', reason: err.message, issues: err.issues });
      return { ok: false, outcome: { ack: true, kind: 'poison', cause: 'undecodable', reason: err.message, issues: err.issues } };
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
    log.warn('foreign death notice acked', { event: 'poison_message', cause: 'foreign-application', reason });
    return { ack: true, kind: 'poison', cause: 'foreign-application', reason };
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
    if (verdict.kind !== 'credible') return refused(verdict, notice, log);
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
    const code = typeof err === 'object' && err !== null && 'code' in err ? err.code : undefined;
    const reason = errorMessage(err);
    if (disposition === 'permanent') {
      log.error('death notice failed permanently; acked', { event: 'poison_message', cause: 'permanent-failure', reason, err });
      return { ack: true, kind: 'poison', cause: 'permanent-failure', reason };
    }
    log.warn('death notice nacked for redelivery', { event: 'recovery_retry', reason, code });
    return { ack: false, kind: 'retry', reason, code: typeof code === 'string' ? code : 'error' };
  } finally {
    admitted();
  }
}

/** A notice the plane's records contradict: a beating heartbeat is redelivered (doubt), the rest acked. */
function refused(verdict: Exclude<Verdict, { kind: 'credible' }>, notice: DeathNotice, log: Logger): DeathOutcome {
  const fields = { event: 'death_notice_refused', executorId: notice.executorId, reason: verdict.reason, noticeReason: notice.reason };
  switch (verdict.kind) {
    case 'heartbeat-alive':
      log.warn('death notice about an executor that still beats: nacked for redelivery', { ...fields, redeliver: true });
      return { ack: false, kind: 'retry', reason: verdict.reason, code: 'heartbeat_alive' };
    case 'unknown-executor':
      log.warn('death notice about an unknown executor refused (acked, nothing written)', { ...fields, verdict: verdict.kind });
      return { ack: true, kind: 'refused', verdict: verdict.kind, reason: verdict.reason };
    case 'lock-held':
      log.warn('death notice about a live executor refused (acked)', { ...fields, verdict: verdict.kind });
      return { ack: true, kind: 'refused', verdict: verdict.kind, reason: verdict.reason };
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
