import { BACKENDS_SQL, type Db, type ExecutorRow, ident, LIVENESS_KEY_SQL } from '../../../packages/executor/src/plane/index.js';

/**
 * The reaper's cheap per-tick reads of a fleet it already knows: the registry rows written since
 * its last read, and whether the liveness locks it last saw held by their kits' sessions still are. Both
 * return what changed, not the fleet, so a quiet tick costs the same at ten executors or a thousand.
 * shared/reaper/fleetView.ts says how the reaper uses them and why no death can hide from them.
 */

/** A registry row with what the fast lock check compares: the lock's key and its recorded holder, exactly. */
export interface WatchedRow extends ExecutorRow {
  /** The liveness key's halves as pg_locks lists them (classid, objid), decimal. */
  key_hi: string;
  key_lo: string;
  /** The holder's role and backend start as the registry recorded them, as text (a JS Date drops microseconds). */
  holder_usesysid: string | null;
  holder_started: string | null;
  /** Migration 0017's stamp: the ID of the transaction that last wrote the row (xid8, decimal); null before it. */
  changed_xid: string | null;
}

export interface RegistryRead {
  rows: WatchedRow[];
  /** Rows written by a transaction with an ID at or above this (xid8, decimal) are re-read next time. */
  horizon: string;
}

/**
 * Live registry rows of the app (alive, draining); with `since`, every row of any state written by a
 * transaction whose ID is at least `since` (migration 0017's stamp); with `ids`, those executors' rows of
 * any state. `horizon` is the oldest transaction still running at this read: whatever commits after it
 * carries an ID at or above it, so reading from it next time misses no write, however long it took to
 * commit. The horizon is the whole cluster's: one long transaction anywhere (another database's too) holds it
 * back, and rows already seen come again until it ends — the caller compares stamps, so they are not news.
 */
export async function readRegistry(db: Db, applicationName: string, o: { since?: string; ids?: string[] } = {}): Promise<RegistryRead> {
  const k = LIVENESS_KEY_SQL.key('$1::text', 'x.executor_id');
  const [which, param, name] =
    o.ids !== undefined
      ? ['x.executor_id = ANY($2::text[])', o.ids, 'fleet.registryRows']
      : o.since !== undefined
        ? ['x.changed_xid >= $2::xid8', o.since, 'fleet.registryChanges']
        : [`x.state IN ('alive', 'draining')`, undefined, 'fleet.registry'];
  const res = await db.query<WatchedRow & { horizon: string }>(
    `SELECT h.horizon, x.*, x.changed_xid::text AS changed_xid, x.liveness_usesysid::text AS holder_usesysid, x.liveness_backend_start::text AS holder_started,
            ((${k} >> 32) & 4294967295)::text AS key_hi, (${k} & 4294967295)::text AS key_lo
       FROM (SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon) h
       LEFT JOIN ${ident(db.afterlifeSchema)}.executors x ON x.application_name = $1 AND ${which}
      ORDER BY x.executor_id`,
    param === undefined ? [applicationName] : [applicationName, param],
    name,
  );
  const horizon = res.rows[0]?.horizon ?? o.since ?? '0';
  return { rows: res.rows.filter((r) => r.executor_id !== null), horizon };
}

/** One executor's lock as last seen held by its kit's registered session. */
export interface Holder {
  executorId: string;
  keyHi: string;
  keyLo: string;
  pid: number;
  usesysid: string | null;
  started: string | null;
}

/**
 * Of the given holders, those that no longer hold: the lock is gone from pg_locks, or its backend is no
 * longer the session the registry recorded (another role, another start: a pid reused). The same test as
 * readLiveness's holder check (contract/livenessKey.ts sameHolderSql), on the values the registry held
 * when the holder was verified; pg_locks and the backends' status are shared memory, so this reads no
 * table pages whatever the fleet's size, and returns only the holders that changed. Also the server's
 * uptime, as readLiveness gives it.
 */
export async function holdersGone(db: Db, holders: Holder[]): Promise<{ gone: Set<string>; upMs: number }> {
  const col = <T>(f: (h: Holder) => T) => holders.map(f);
  const res = await db.query<{ gone: string[] | null; up_ms: string }>(
    `WITH l AS MATERIALIZED (
       SELECT classid, objid, pid FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 1
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
     ),
     h AS MATERIALIZED (
       SELECT l.classid, l.objid, l.pid, a.usesysid, a.backend_start FROM l JOIN (${BACKENDS_SQL}) a ON a.pid = l.pid
     )
     SELECT ARRAY(
              SELECT e.id FROM unnest($1::text[], $2::oid[], $3::oid[], $4::int[], $5::oid[], $6::timestamptz[])
                            AS e(id, hi, lo, pid, usesysid, started)
                LEFT JOIN h ON h.classid = e.hi AND h.objid = e.lo AND h.pid = e.pid
                           AND (e.usesysid IS NULL OR h.usesysid = e.usesysid)
                           AND (e.started IS NULL OR h.backend_start IS NULL OR h.backend_start = e.started)
               WHERE h.pid IS NULL) AS gone,
            (EXTRACT(EPOCH FROM now() - pg_postmaster_start_time()) * 1000)::bigint::text AS up_ms`,
    [col((h) => h.executorId), col((h) => h.keyHi), col((h) => h.keyLo), col((h) => h.pid), col((h) => h.usesysid), col((h) => h.started)],
    'fleet.holdersGone',
  );
  const row = res.rows[0];
  return { gone: new Set(row?.gone ?? []), upMs: Number(row?.up_ms ?? 0) };
}
