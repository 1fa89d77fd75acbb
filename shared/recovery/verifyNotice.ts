import { lookupNoticed as lookup } from '../dbos/noticeLookup.js';
import type { DeathNotice } from '../../packages/executor/src/plane/index.js';
import { type AliveDeps, isAlive } from './alive.js';

/**
 * A death notice is a claim: anyone who may publish on `executor-deaths` (every executor's service account)
 * can name any executor with any reason and any evidence fields. Before it moves anything, the plane checks
 * it against its own records and its own reading of the evidence:
 *
 * - an executor with no registry row and no PENDING workflow is unknown: a lookup, acked, nothing written;
 * - otherwise evidence of life refuses it, by the rule `afterlife-plane recover` shares (alive.ts), with a
 *   notice's benefit of the doubt: `force: true` skips it (the operator's override; the topic's publisher
 *   list bounds who can say it), a held liveness lock refuses (bar the executor's own leaving notice), a
 *   beat inside the bounds saying `alive` refuses all but `heartbeat-lapsed` (the recovery re-reads that) —
 *   while fresh, for a kit whose lock is the witness — and such a refusal is redelivered (`heartbeat-alive`).
 *
 * `livenessTracked` is the registry's word on whether the executor's kit holds a liveness lock: only then
 * is a free lock evidence of death (the sender's `evidence: "liveness"` is not taken on trust).
 */
export type Verdict =
  /** No registry row and no PENDING workflow: refused and acked, nothing written. */
  | { kind: 'unknown-executor'; reason: string }
  /** Its liveness lock is held: refused and acked. */
  | { kind: 'lock-held'; reason: string }
  /** Its heartbeat says alive: doubt, not proof, so refused and redelivered until the beat is stale. */
  | { kind: 'heartbeat-alive'; reason: string }
  /** Nothing the plane sees says it lives: the recovery goes ahead. */
  | { kind: 'credible'; livenessTracked: boolean };

export async function verifyNotice(deps: AliveDeps, notice: DeathNotice): Promise<Verdict> {
  const { applicationName: app, executorId: id } = notice;
  const known = await lookup(deps.db, app, id);
  if (!known.registered && !known.pending) {
    return {
      kind: 'unknown-executor',
      reason: `unknown executor ${JSON.stringify(id)}: no registry row and no PENDING workflow; nothing to recover`,
    };
  }
  const livenessTracked = known.liveness === true;
  const life = await isAlive(deps, {
    applicationName: app,
    executorId: id,
    reason: notice.reason,
    registryState: known.state,
    force: notice.force === true,
    doubt: 'proceed',
    livenessTracked,
  });
  if (life.alive === true && life.witness === 'liveness-lock') {
    return {
      kind: 'lock-held',
      reason: `${id} holds its liveness lock (its process still has a Postgres session): a ${notice.reason} notice about a live executor needs "force": true`,
    };
  }
  if (life.alive === true && life.witness === 'heartbeat') {
    // Doubt, not proof: a beat goes stale (or its key expires) once the process is gone, so the notice is
    // redelivered and judged again then, never dropped.
    const why = life.fresh
      ? `its beat is fresh (${life.ageMs ?? '?'} ms old)`
      : 'its heartbeat key is still there and its kit holds no liveness lock (the key is the only witness until it expires)';
    return {
      kind: 'heartbeat-alive',
      reason: `${id}'s heartbeat says alive, ${why}: a ${notice.reason} notice about a live executor needs "force": true; redelivered until the beat is stale`,
    };
  }
  return { kind: 'credible', livenessTracked };
}
