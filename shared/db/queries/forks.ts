import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/** The fork ledger and the dead letters (migration 0004). */
export interface ForkRecord {
  applicationName: string;
  root: string;
  n: number;
  source: string;
  fromStep: number;
  newWorkflowId: string;
  applicationVersion: string | undefined;
  reason: 'diverged' | 'child-diverged' | 'orphaned-version' | 'stuck';
  divergedWorkflowId: string | undefined;
  detail: string | undefined;
  forkedBy: string;
  childForkId?: string | undefined;
  awaitedBy?: string | undefined;
}

/**
 * Records a fork; a repeat (same root and n) is a no-op, so retries and racing callers leave one row.
 * afterlife writes it before the fork (an intent: a crash between the two must not leave a fork the
 * ledger never heard of), so a row does not prove the fork exists: DBOS's workflow_status says that.
 * Forks made elsewhere (the app's getResultWithAutoFork) are added by reconciliation (shared/repair/primitives/reconcile.ts).
 */
export async function recordFork(db: Db, f: ForkRecord): Promise<void> {
  await db.query(
    `INSERT INTO ${ident(db.afterlifeSchema)}.forks
       (root_workflow_id, n, application_name, source_workflow_id, from_step, new_workflow_id, application_version,
        reason, diverged_workflow_id, detail, forked_by, child_fork_id, awaited_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     ON CONFLICT DO NOTHING`,
    [
      f.root,
      f.n,
      f.applicationName,
      f.source,
      f.fromStep,
      f.newWorkflowId,
      f.applicationVersion ?? null,
      f.reason,
      f.divergedWorkflowId ?? null,
      f.detail ?? null,
      f.forkedBy,
      f.childForkId ?? null,
      f.awaitedBy ?? null,
    ],
    'forks.record',
  );
}

/** A fork-to-latest ledger row whose original is not cancelled yet, with what it takes to finish it. */
export interface UncancelledOriginal {
  source: string;
  newWorkflowId: string;
  fromStep: number;
  applicationVersion: string | undefined;
  /** Children forked in the same batch, as `{ child: its fork }`, so a re-made parent fork awaits them. */
  replacementChildren: Record<string, string> | undefined;
  /** How long ago the row was written (database clock). */
  ageMs: number;
}

/**
 * fork-to-latest rows whose original is not cancelled yet: the step after the ledger row (the fork) or
 * after the fork (the cancel) was interrupted.
 */
export async function uncancelledOriginals(db: Db, applicationName: string, limit: number): Promise<UncancelledOriginal[]> {
  const a = ident(db.afterlifeSchema);
  const res = await db.query<{
    source_workflow_id: string;
    new_workflow_id: string;
    from_step: number;
    application_version: string | null;
    replacement_children: Record<string, string> | null;
    age_ms: number;
  }>(
    `SELECT f.source_workflow_id, f.new_workflow_id, f.from_step, f.application_version,
            (SELECT jsonb_object_agg(c.source_workflow_id, c.new_workflow_id) FROM ${a}.forks c WHERE c.awaited_by = f.new_workflow_id) AS replacement_children,
            (EXTRACT(EPOCH FROM now() - f.created_at) * 1000)::float8 AS age_ms
       FROM ${a}.forks f
      WHERE f.application_name = $1 AND f.reason = 'orphaned-version' AND f.original_cancelled_at IS NULL
      ORDER BY f.created_at LIMIT $2`,
    [applicationName, limit],
    'forks.uncancelled',
  );
  return res.rows.map((r) => ({
    source: r.source_workflow_id,
    newWorkflowId: r.new_workflow_id,
    fromStep: r.from_step,
    applicationVersion: r.application_version ?? undefined,
    replacementChildren: r.replacement_children ?? undefined,
    ageMs: r.age_ms,
  }));
}

/**
 * Drops a fork-to-latest intent that will never be carried out: no fork under its ID, and older than
 * `olderThanMs`, past the longest invocation that could still be about to make it. Re-checked here, in
 * one statement, so a fork made meanwhile keeps its row.
 */
export async function dropAbandonedForkIntent(db: Db, newWorkflowId: string, olderThanMs: number): Promise<boolean> {
  const res = await db.query(
    `DELETE FROM ${ident(db.afterlifeSchema)}.forks f
      WHERE f.new_workflow_id = $1 AND f.original_cancelled_at IS NULL
        AND f.created_at < now() - make_interval(secs => $2::double precision / 1000)
        AND NOT EXISTS (SELECT 1 FROM ${ident(db.dbosSchema)}.workflow_status ws WHERE ws.workflow_uuid = f.new_workflow_id)`,
    [newWorkflowId, olderThanMs],
    'forks.dropAbandonedIntent',
  );
  return (res.rowCount ?? 0) > 0;
}

export async function markOriginalCancelled(db: Db, newWorkflowId: string): Promise<void> {
  await db.query(
    `UPDATE ${ident(db.afterlifeSchema)}.forks SET original_cancelled_at = now() WHERE new_workflow_id = $1 AND original_cancelled_at IS NULL`,
    [newWorkflowId],
    'forks.markCancelled',
  );
}

export interface DeadLetterRow {
  root_workflow_id: string;
  application_name: string;
  workflow_id: string;
  forks: number;
  reason: string;
  error: string | null;
  created_at: Date;
}

/**
 * Inserts the lineage's dead letter and claims the right to publish it. Returns the row only to the one
 * caller that must publish: the inserter, or a retry once an earlier claim went stale without publishing.
 * Racing callers inside the claim window get nothing, so exactly one message goes out.
 */
export async function claimDeadLetter(
  db: Db,
  d: {
    applicationName: string;
    root: string;
    workflowId: string;
    forks: number;
    reason: string;
    error: string | undefined;
    staleClaimMs: number;
  },
): Promise<DeadLetterRow | undefined> {
  const res = await db.query<DeadLetterRow>(
    `INSERT INTO ${ident(db.afterlifeSchema)}.dead_letters AS d (root_workflow_id, application_name, workflow_id, forks, reason, error)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (root_workflow_id) DO UPDATE SET publish_claimed_at = now()
      WHERE d.published_at IS NULL AND d.publish_claimed_at < now() - make_interval(secs => $7::double precision / 1000)
     RETURNING root_workflow_id, application_name, workflow_id, forks, reason, error, created_at`,
    [d.root, d.applicationName, d.workflowId, d.forks, d.reason, d.error ?? null, d.staleClaimMs],
    'deadLetters.claim',
  );
  return res.rows[0];
}

export async function markDeadLetterPublished(db: Db, root: string, messageId: string): Promise<void> {
  await db.query(
    `UPDATE ${ident(db.afterlifeSchema)}.dead_letters SET published_at = now(), message_id = $2 WHERE root_workflow_id = $1`,
    [root, messageId],
    'deadLetters.published',
  );
}
