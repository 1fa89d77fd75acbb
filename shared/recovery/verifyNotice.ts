import type { Redis } from 'ioredis';
import type { Db } from '../db/pool.js';
import { ident } from '../db/pool.js';
import { appScope } from '../dbos/sql.js';
import type { DeathNotice } from '../events/deathNotice.js';
import { beatEvidence } from '../heartbeat/bounds.js';
import { heartbeatKey, readHeartbeat } from '../heartbeat/index.js';
import { readLiveness } from '../liveness/held.js';
import { waitReady } from '../lock/redis.js';

/**
 * A death notice is a claim: anyone who may publish on `executor-deaths` (every executor's service account)
 * can name any executor with any reason and any evidence fields. Before it moves anything, the plane checks
 * it against its own records and its own reading of the evidence (issue 23):
 *
 * - an executor with no registry row and no PENDING workflow is unknown: a lookup, acked, nothing written;
 * - `force: true` skips the evidence of life (the operator's override; the topic's publisher list bounds who can say it);
 * - a held liveness lock (Postgres's word) refuses `heartbeat-lapsed` and `manual` notices, and the
 *   executor's own `sigterm`/`drained` notice unless the registry or its key says it is draining or drained
 *   (it publishes while it still holds the lock, after recording that);
 * - a heartbeat inside the bounds a kit writes, saying `alive`, refuses `manual`/`sigterm`/`drained`
 *   notices; for `heartbeat-lapsed` the recovery re-reads it (a false alarm) with the plane's thresholds.
 *
 * `livenessTracked` is the registry's word on whether the executor's kit holds a liveness lock: only then
 * is a free lock evidence of death (the sender's `evidence: "liveness"` is not taken on trust).
 */
export type Verdict = { refused: string; unknown?: true } | { refused?: undefined; livenessTracked: boolean };

export interface VerifyDeps {
  db: Db;
  redis: Redis | undefined;
  keyPrefix?: string;
  heartbeatIntervalMs: number;
  clock: () => number;
}

export async function verifyNotice(deps: VerifyDeps, notice: DeathNotice): Promise<Verdict> {
  const { applicationName: app, executorId: id } = notice;
  const known = await lookup(deps.db, app, id);
  if (!known.registered && !known.pending) {
    return { refused: `unknown executor ${JSON.stringify(id)}: no registry row and no PENDING workflow; nothing to recover`, unknown: true };
  }
  const livenessTracked = known.liveness === true;
  if (notice.force === true) return { livenessTracked };

  const own = notice.reason === 'sigterm' || notice.reason === 'drained';
  const beat = await readBeat(deps, notice);
  const leaving = known.state === 'draining' || known.state === 'drained' || known.state === 'dead' || beat.state === 'draining' || beat.state === 'drained';
  if (!own || !leaving) {
    if ((await readLiveness(deps.db, app, [id])).held.has(id)) {
      return { refused: `${id} holds its liveness lock (its process still has a Postgres session): a ${notice.reason} notice about a live executor needs "force": true` };
    }
  }
  if (notice.reason !== 'heartbeat-lapsed' && beat.state === 'alive') {
    return { refused: `${id}'s heartbeat says alive: a ${notice.reason} notice about a live executor needs "force": true` };
  }
  return { livenessTracked };
}

/**
 * One statement: the registry row (if any) and, only without one, whether the executor owns a PENDING
 * workflow of the app (a scan of the PENDING rows through DBOS's partial index, or the opt-in owner index).
 */
async function lookup(db: Db, app: string, id: string): Promise<{ registered: boolean; state: string | undefined; liveness: boolean | undefined; pending: boolean }> {
  const res = await db.query<{ state: string | null; liveness: boolean | null; pending: boolean }>(
    `SELECT x.state, x.liveness,
            CASE WHEN x.state IS NULL THEN EXISTS (SELECT 1 FROM ${ident(db.dbosSchema)}.workflow_status
                     WHERE status = 'PENDING' AND executor_id = $2 AND ${appScope('application_name', '$1')}) ELSE false END AS pending
       FROM (SELECT 1) AS one
       LEFT JOIN ${ident(db.afterlifeSchema)}.executors AS x ON x.application_name = $1 AND x.executor_id = $2`,
    [app, id],
    'notice.lookup',
  );
  const row = res.rows[0];
  return { registered: row?.state != null, state: row?.state ?? undefined, liveness: row?.liveness ?? undefined, pending: row?.pending === true };
}

/** The heartbeat's state when it is evidence (inside the bounds); `undefined` when absent, out of bounds or Redis can't say. */
async function readBeat(deps: VerifyDeps, notice: DeathNotice): Promise<{ state: string | undefined }> {
  if (!deps.redis) return { state: undefined };
  if (deps.redis.status !== 'ready') await waitReady(deps.redis, 500);
  if (deps.redis.status !== 'ready') return { state: undefined };
  const r = await readHeartbeat(deps.redis, heartbeatKey(notice.applicationName, notice.executorId, deps.keyPrefix)).catch(() => undefined);
  const e = beatEvidence(r, deps.clock(), deps.heartbeatIntervalMs);
  return { state: e.kind === 'beat' ? e.value.state : undefined };
}
