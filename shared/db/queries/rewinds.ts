import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/** The rewind ledger (migration 0009). */
export type RewindReason = 'diverged' | 'child-diverged' | 'orphaned-version' | 'stuck';

/** A workflow rewound before the one the row is for (a parent's diverged descendant), bottom-up. */
export interface RewoundDescendant {
  workflowId: string;
  fromStep: number;
  /** completed_at of the ending it was rewound from: a later ending means it was rewound already. */
  incarnationMs: number;
}

export interface RewindIntent {
  applicationName: string;
  root: string;
  /** Forks above this workflow in its lineage (DBOS's forked_from chain): they count against the budget. */
  forksBefore: number;
  workflowId: string;
  incarnationMs: number;
  fromStep: number;
  applicationVersion: string | undefined;
  reason: RewindReason;
  divergedWorkflowId: string | undefined;
  detail: string | undefined;
  descendants: RewoundDescendant[];
  rewoundBy: string;
}

export type RewindClaim =
  | { kind: 'claimed'; n: number; takenOver: boolean; descendants: RewoundDescendant[] }
  /** Another repairer holds a fresh claim on this ending: it is doing this very rewind. */
  | { kind: 'held'; n: number }
  /** This ending was rewound already (the row says so). */
  | { kind: 'done'; n: number }
  /** Another ending of the lineage took this n meanwhile: retried by the next pass. */
  | { kind: 'raced' };

/**
 * Claims the rewind of one ending of a workflow: inserts the intent (n = forks before it + its lineage's
 * rewinds so far + 1) or, when the ending already has a row whose claim went stale without a rewind
 * (its claimer died), takes the claim over. Racing callers get one 'claimed'; the rest 'held'. Postgres
 * decides: the unique (workflow_id, incarnation_ms) and the stale-claim predicate are in the statements.
 */
export async function claimRewind(db: Db, r: RewindIntent, staleClaimMs: number): Promise<RewindClaim> {
  const t = `${ident(db.afterlifeSchema)}.rewinds`;
  // Params: $1 root, $2 forks before, $3 app, $4 workflow, $5 incarnation, $6 from step, $7 version, $8 reason,
  // $9 diverged workflow, $10 detail, $11 descendants, $12 rewound by.
  const ins = await db.query<{ n: number }>(
    `INSERT INTO ${t} (root_workflow_id, n, application_name, workflow_id, incarnation_ms, from_step, application_version,
                       reason, diverged_workflow_id, detail, descendants, rewound_by)
     SELECT $1, $2::int + (SELECT count(*)::int FROM ${t} WHERE root_workflow_id = $1) + 1, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12
     ON CONFLICT DO NOTHING
     RETURNING n`,
    [
      r.root,
      r.forksBefore,
      r.applicationName,
      r.workflowId,
      r.incarnationMs,
      r.fromStep,
      r.applicationVersion ?? null,
      r.reason,
      r.divergedWorkflowId ?? null,
      r.detail ?? null,
      JSON.stringify(r.descendants),
      r.rewoundBy,
    ],
    'rewinds.claim',
  );
  const inserted = ins.rows[0];
  if (inserted) return { kind: 'claimed', n: inserted.n, takenOver: false, descendants: r.descendants };
  const over = await db.query<{ n: number; descendants: RewoundDescendant[] | null }>(
    `UPDATE ${t} SET claimed_at = now(), rewound_by = $3
      WHERE workflow_id = $1 AND incarnation_ms = $2 AND rewound_at IS NULL
        AND claimed_at < now() - make_interval(secs => $4::double precision / 1000)
      RETURNING n, descendants`,
    [r.workflowId, r.incarnationMs, r.rewoundBy, staleClaimMs],
    'rewinds.takeOver',
  );
  const taken = over.rows[0];
  // The plan of the first claimer is kept: its descendants may be half rewound already.
  if (taken) return { kind: 'claimed', n: taken.n, takenOver: true, descendants: taken.descendants ?? [] };
  const row = await db.query<{ n: number; done: boolean }>(
    `SELECT n, rewound_at IS NOT NULL AS done FROM ${t} WHERE workflow_id = $1 AND incarnation_ms = $2`,
    [r.workflowId, r.incarnationMs],
    'rewinds.read',
  );
  const existing = row.rows[0];
  if (!existing) return { kind: 'raced' };
  return existing.done ? { kind: 'done', n: existing.n } : { kind: 'held', n: existing.n };
}

export async function markRewound(db: Db, workflowId: string, incarnationMs: number): Promise<void> {
  await db.query(
    `UPDATE ${ident(db.afterlifeSchema)}.rewinds SET rewound_at = now() WHERE workflow_id = $1 AND incarnation_ms = $2 AND rewound_at IS NULL`,
    [workflowId, incarnationMs],
    'rewinds.mark',
  );
}

/**
 * Rewinds recorded for a lineage: with its forks, what MAX_REPAIRS bounds. `except` leaves out the row of
 * the ending being repaired, so a claim taken over after a crash is finished rather than counted.
 */
export async function rewindsOf(db: Db, root: string, except?: { workflowId: string; incarnationMs: number }): Promise<number> {
  const res = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${ident(db.afterlifeSchema)}.rewinds
      WHERE root_workflow_id = $1 AND NOT (workflow_id IS NOT DISTINCT FROM $2 AND incarnation_ms IS NOT DISTINCT FROM $3::bigint)`,
    [root, except?.workflowId ?? null, except?.incarnationMs ?? null],
    'rewinds.count',
  );
  return res.rows[0]?.n ?? 0;
}

/** An orphaned-version rewind whose claimer went quiet before it was done (see finishOrphanRewinds). */
export interface StaleRewind {
  root: string;
  n: number;
  workflowId: string;
  incarnationMs: number;
  fromStep: number;
  applicationVersion: string | undefined;
}

/**
 * Orphaned-version rewinds claimed, not done, and quiet for `staleClaimMs`: the claimer died between its
 * ledger row, the cancel and the rewind. Only a day back: past that the workflow has moved on anyway.
 */
export async function staleOrphanRewinds(db: Db, applicationName: string, staleClaimMs: number, limit: number): Promise<StaleRewind[]> {
  const res = await db.query<{
    root_workflow_id: string;
    n: number;
    workflow_id: string;
    incarnation_ms: string;
    from_step: number;
    application_version: string | null;
  }>(
    `SELECT root_workflow_id, n, workflow_id, incarnation_ms::text, from_step, application_version
       FROM ${ident(db.afterlifeSchema)}.rewinds
      WHERE application_name = $1 AND reason = 'orphaned-version' AND rewound_at IS NULL
        AND claimed_at < now() - make_interval(secs => $2::double precision / 1000)
        AND created_at > now() - interval '1 day'
      ORDER BY created_at LIMIT $3`,
    [applicationName, staleClaimMs, limit],
    'rewinds.staleOrphans',
  );
  return res.rows.map((r) => ({
    root: r.root_workflow_id,
    n: r.n,
    workflowId: r.workflow_id,
    incarnationMs: Number(r.incarnation_ms),
    fromStep: r.from_step,
    applicationVersion: r.application_version ?? undefined,
  }));
}
