import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * The reaper's persisted view of each executor's liveness evidence (migration 0003). Absence is counted
 * across ticks and invocations, on the database clock, so "absent for a TTL, seen on two ticks" means the
 * same thing whichever instance runs the tick.
 */
const table = (db: Db) => `${ident(db.afterlifeSchema)}.executor_observations`;

export type Evidence = 'heartbeat' | 'sessions' | 'liveness';

export interface ObservationRow {
  executorId: string;
  lastBeatSeenAt: Date | null;
}

/** Executors whose heartbeat the reaper has ever seen: they have the kit, so a missing key is evidence. */
export async function executorsSeenBeating(db: Db, applicationName: string, executorIds: string[]): Promise<Set<string>> {
  if (executorIds.length === 0) return new Set();
  const res = await db.query<{ executor_id: string }>(
    `SELECT executor_id FROM ${table(db)}
      WHERE application_name = $1 AND executor_id = ANY($2) AND last_beat_seen_at IS NOT NULL`,
    [applicationName, executorIds],
    'observations.seenBeating',
  );
  return new Set(res.rows.map((r) => r.executor_id));
}

/**
 * Evidence of life: forget any absence and, for a heartbeat, remember that this executor has the kit.
 * Clearing `declared_dead_at` too: an executor seen alive after a declaration was a false alarm.
 */
export async function recordPresent(db: Db, applicationName: string, executorIds: string[], evidence: Evidence): Promise<void> {
  if (executorIds.length === 0) return;
  // Called every tick for every live executor: a row is written only when something changes (a streak to
  // forget, a declaration to clear, a first or a minute-old beat sighting), so a quiet fleet costs a read.
  await db.query(
    `INSERT INTO ${table(db)} AS o (application_name, executor_id, last_beat_seen_at)
     SELECT $1, id, CASE WHEN $3::text = 'heartbeat' THEN now() END FROM unnest($2::text[]) AS id
     ON CONFLICT (application_name, executor_id) DO UPDATE
        SET last_beat_seen_at = COALESCE(EXCLUDED.last_beat_seen_at, o.last_beat_seen_at),
            evidence = NULL, first_absent_at = NULL, last_absent_at = NULL, absent_ticks = 0, declared_dead_at = NULL
      WHERE o.evidence IS NOT NULL OR o.first_absent_at IS NOT NULL OR o.declared_dead_at IS NOT NULL OR o.absent_ticks <> 0
         OR (EXCLUDED.last_beat_seen_at IS NOT NULL
             AND (o.last_beat_seen_at IS NULL OR o.last_beat_seen_at < now() - interval '1 minute'))`,
    [applicationName, executorIds, evidence],
    'observations.present',
  );
}

export interface Absence {
  executorId: string;
  /** How long the evidence has been absent without a break, on the database clock. */
  absentMs: number;
  absentTicks: number;
  /** ms since the reaper last declared it dead; undefined if never. */
  declaredAgoMs: number | undefined;
}

/**
 * Records one tick's absence of `evidence`. The streak restarts when the evidence kind changes or when
 * the previous absent observation is older than `continuityMs` (the reaper was not running, so nobody
 * knows whether the executor came back in between): two samples far apart are not one long absence.
 */
/** The previous absent observation (same evidence) is recent enough to extend the streak. */
const CONTINUES = `(o.evidence IS NOT DISTINCT FROM $3 AND o.first_absent_at IS NOT NULL
                    AND o.last_absent_at >= now() - make_interval(secs => $4::double precision / 1000))`;

export async function recordAbsent(
  db: Db,
  applicationName: string,
  executorIds: string[],
  evidence: Evidence,
  continuityMs: number,
): Promise<Absence[]> {
  if (executorIds.length === 0) return [];
  const res = await db.query<{ executor_id: string; absent_ms: string; absent_ticks: number; declared_ago_ms: string | null }>(
    `WITH up AS (
       INSERT INTO ${table(db)} AS o (application_name, executor_id, evidence, first_absent_at, last_absent_at, absent_ticks)
       SELECT $1, id, $3::text, now(), now(), 1 FROM unnest($2::text[]) AS id
       ON CONFLICT (application_name, executor_id) DO UPDATE
          SET evidence = $3,
              first_absent_at = CASE WHEN ${CONTINUES} THEN o.first_absent_at ELSE now() END,
              absent_ticks = CASE WHEN ${CONTINUES} THEN o.absent_ticks + 1 ELSE 1 END,
              last_absent_at = now()
       RETURNING o.executor_id, o.first_absent_at, o.absent_ticks, o.declared_dead_at
     )
     SELECT executor_id, (EXTRACT(EPOCH FROM now() - first_absent_at) * 1000)::bigint::text AS absent_ms, absent_ticks,
            (EXTRACT(EPOCH FROM now() - declared_dead_at) * 1000)::bigint::text AS declared_ago_ms
       FROM up`,
    [applicationName, executorIds, evidence, continuityMs],
    'observations.absent',
  );
  return res.rows.map((r) => ({
    executorId: r.executor_id,
    absentMs: Number(r.absent_ms),
    absentTicks: r.absent_ticks,
    declaredAgoMs: r.declared_ago_ms === null ? undefined : Number(r.declared_ago_ms),
  }));
}

/** Remembers that the reaper declared this executor dead, so the next ticks do not declare it again. */
export async function recordDeclaredDead(db: Db, applicationName: string, executorId: string): Promise<void> {
  await db.query(
    `UPDATE ${table(db)} SET declared_dead_at = now() WHERE application_name = $1 AND executor_id = $2`,
    [applicationName, executorId],
    'observations.declared',
  );
}

/** Restarts every heartbeat-absence streak of the app: Redis lost its keys, so earlier absences prove nothing. */
export async function resetHeartbeatAbsences(db: Db, applicationName: string): Promise<void> {
  await db.query(
    `UPDATE ${table(db)} SET evidence = NULL, first_absent_at = NULL, last_absent_at = NULL, absent_ticks = 0
      WHERE application_name = $1 AND evidence = 'heartbeat'`,
    [applicationName],
    'observations.resetHeartbeat',
  );
}

/** An executor's persisted absence streak as the database holds it now, for a dry run to extend in memory. */
export interface StreakRow {
  executorId: string;
  evidence: Evidence | null;
  firstAbsentMs: number | null;
  lastAbsentMs: number | null;
  absentTicks: number;
  declaredAgoMs: number | undefined;
  /** The database clock at the read (epoch ms): a dry run's streaks run on the same clock as a real one's. */
  nowMs: number;
}

/** Read-only: the streak of each executor (absent ones included, with no streak). What `reap --dry-run` starts from. */
export async function readStreaks(db: Db, applicationName: string, executorIds: string[]): Promise<StreakRow[]> {
  if (executorIds.length === 0) return [];
  const ms = (col: string) => `(EXTRACT(EPOCH FROM ${col}) * 1000)::bigint::text`;
  const res = await db.query<{
    id: string;
    evidence: Evidence | null;
    first_ms: string | null;
    last_ms: string | null;
    absent_ticks: number | null;
    declared_ago_ms: string | null;
    now_ms: string;
  }>(
    `SELECT id, o.evidence, ${ms('o.first_absent_at')} AS first_ms, ${ms('o.last_absent_at')} AS last_ms, o.absent_ticks,
            (EXTRACT(EPOCH FROM now() - o.declared_dead_at) * 1000)::bigint::text AS declared_ago_ms, ${ms('now()')} AS now_ms
       FROM unnest($2::text[]) AS id
       LEFT JOIN ${table(db)} o ON o.application_name = $1 AND o.executor_id = id`,
    [applicationName, executorIds],
    'observations.readStreaks',
  );
  return res.rows.map((r) => ({
    executorId: r.id,
    evidence: r.evidence,
    firstAbsentMs: r.first_ms === null ? null : Number(r.first_ms),
    lastAbsentMs: r.last_ms === null ? null : Number(r.last_ms),
    absentTicks: r.absent_ticks ?? 0,
    declaredAgoMs: r.declared_ago_ms === null ? undefined : Number(r.declared_ago_ms),
    nowMs: Number(r.now_ms),
  }));
}
