import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/** The round in progress and the last pass (afterlife.retention_state, one row per application). */
export interface RetentionRound {
  /** The cutoff (epoch ms) the round's last batch applied: shown by `status`, recomputed by every pass. */
  cutoffMs: number;
  watermark: { completedAt: number; workflowId: string } | undefined;
  startedAt: Date;
}

export interface RetentionStateRow {
  round: RetentionRound | undefined;
  lastPassAt: Date | undefined;
  lastPass: Record<string, unknown> | undefined;
  totalDeleted: number;
  totalTimedOut: number;
}

export async function readRetentionState(db: Db, applicationName: string): Promise<RetentionStateRow> {
  const a = ident(db.afterlifeSchema);
  const r = await db.query<{
    round_started_at: Date | null;
    cutoff_ms: string | null;
    watermark_ms: string | null;
    watermark_id: string | null;
    last_pass_at: Date | null;
    last_pass: Record<string, unknown> | null;
    total_deleted: string;
    total_timed_out: string;
  }>(`SELECT * FROM ${a}.retention_state WHERE application_name = $1`, [applicationName], 'retention.readState');
  const row = r.rows[0];
  if (!row) return { round: undefined, lastPassAt: undefined, lastPass: undefined, totalDeleted: 0, totalTimedOut: 0 };
  return {
    round:
      row.cutoff_ms !== null && row.round_started_at !== null
        ? {
            cutoffMs: Number(row.cutoff_ms),
            startedAt: row.round_started_at,
            watermark:
              row.watermark_ms !== null && row.watermark_id !== null
                ? { completedAt: Number(row.watermark_ms), workflowId: row.watermark_id }
                : undefined,
          }
        : undefined,
    lastPassAt: row.last_pass_at ?? undefined,
    lastPass: row.last_pass ?? undefined,
    totalDeleted: Number(row.total_deleted),
    totalTimedOut: Number(row.total_timed_out),
  };
}

/**
 * Moves the round's watermark forward (never back: two passes at once each advance it to what they
 * examined, and the greater wins), or starts/ends a round (`round` undefined ends it).
 */
export async function saveRound(db: Db, applicationName: string, round: RetentionRound | undefined): Promise<void> {
  const a = ident(db.afterlifeSchema);
  if (!round) {
    await db.query(
      `INSERT INTO ${a}.retention_state (application_name) VALUES ($1)
       ON CONFLICT (application_name) DO UPDATE SET round_started_at = NULL, cutoff_ms = NULL, watermark_ms = NULL, watermark_id = NULL`,
      [applicationName],
      'retention.endRound',
    );
    return;
  }
  await db.query(
    `INSERT INTO ${a}.retention_state AS r (application_name, round_started_at, cutoff_ms, watermark_ms, watermark_id)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (application_name) DO UPDATE
       SET round_started_at = EXCLUDED.round_started_at, cutoff_ms = EXCLUDED.cutoff_ms,
           watermark_ms = EXCLUDED.watermark_ms, watermark_id = EXCLUDED.watermark_id
     WHERE r.round_started_at IS DISTINCT FROM EXCLUDED.round_started_at OR r.watermark_ms IS NULL
        OR (EXCLUDED.watermark_ms, EXCLUDED.watermark_id) > (r.watermark_ms, r.watermark_id)`,
    [applicationName, round.startedAt, round.cutoffMs, round.watermark?.completedAt ?? null, round.watermark?.workflowId ?? null],
    'retention.saveRound',
  );
}

/** The last pass's summary, and the running totals. */
export async function recordPass(
  db: Db,
  applicationName: string,
  summary: Record<string, unknown>,
  deleted: number,
  timedOut: number,
): Promise<void> {
  const a = ident(db.afterlifeSchema);
  await db.query(
    `INSERT INTO ${a}.retention_state AS r (application_name, last_pass_at, last_pass, total_deleted, total_timed_out)
     VALUES ($1, now(), $2::jsonb, $3, $4)
     ON CONFLICT (application_name) DO UPDATE
       SET last_pass_at = now(), last_pass = EXCLUDED.last_pass,
           total_deleted = r.total_deleted + EXCLUDED.total_deleted, total_timed_out = r.total_timed_out + EXCLUDED.total_timed_out`,
    [applicationName, JSON.stringify(summary), deleted, timedOut],
    'retention.recordPass',
  );
}
