import { hostname } from 'node:os';
import { claimRewind, markRewound, rewindsOf, staleOrphanRewinds } from '../../db/queries/rewinds.js';
import {
  errorMessage,
  type ForkClient,
  lineageOf,
  type Logger,
  noFaults,
  queueOf,
  type QueueTarget,
  stepAfterLastCheckpoint,
} from '../../../packages/executor/src/plane/index.js';
import type { RepairDeps } from '../primitives/deps.js';
import { deadLetter, underRootLock } from '../primitives/ledger.js';
import { dataSourceRewindCheck, DEFAULT_REWIND_CLAIM_MS } from '../primitives/rewind.js';
import type { OrphanInfo, OrphanOutcome } from './orphanOutcome.js';

/**
 * Orphaned-version rows repaired in place (REPAIR_MODE=rewind, the default; the choice is
 * repairOrphaned's, orphaned.ts): each ENQUEUED row of a version no live executor runs is cancelled
 * (DBOS's statement) and rewound from after its last checkpoint with its application_version restamped
 * to the latest, so a live executor claims it and it finishes under its
 * own ID. Children and parents keep their IDs, so nothing needs remapping and the order does not matter.
 *
 * Ledger row first (claimed per workflow and its ENQUEUED updated_at), then the cancel, then the rewind.
 * A claimer that dies after the cancel leaves a CANCELLED row with an open claim: finishOrphanRewinds
 * (each orphaned-versions pass) rewinds it once the claim is stale. Rows with data-source checkpoints at
 * or past the cut, and a DBOS without rewind, are returned in `fallback` for the fork path.
 */
export async function rewindOrphans(
  deps: RepairDeps,
  client: ForkClient,
  info: OrphanInfo,
  latest: string,
  log: Logger,
): Promise<{ outcomes: OrphanOutcome[]; fallback: string[] }> {
  const outcomes: OrphanOutcome[] = [];
  const fallback: string[] = [];
  for (const id of info.workflowIds) {
    // One row's failure must not strand the rest (see forkOrphan).
    const r = await rewindOrphan(deps, client, log, id, info.applicationVersion, latest).catch((err: unknown): OrphanOutcome => {
      log.error('rewind onto the latest version failed for a workflow; it stays ENQUEUED on its old version', {
        workflowId: id,
        err,
        event: 'orphaned_version_fork_failed',
      });
      return { workflowId: id, outcome: 'failed', why: errorMessage(err) };
    });
    if (r === 'fallback') fallback.push(id);
    else outcomes.push(r);
  }
  return { outcomes, fallback };
}

async function rewindOrphan(
  deps: RepairDeps,
  client: ForkClient,
  log: Logger,
  id: string,
  orphanedVersion: string | null,
  latest: string,
): Promise<OrphanOutcome | 'fallback'> {
  const status = await client.getWorkflow(id);
  if (!status || status.status !== 'ENQUEUED' || (status.applicationVersion ?? null) !== orphanedVersion) {
    return {
      workflowId: id,
      outcome: 'skipped',
      why: !status
        ? 'missing'
        : status.status !== 'ENQUEUED'
          ? `status ${status.status}`
          : `now on version ${status.applicationVersion ?? '(none)'}`,
    };
  }
  if (status.updatedAt === undefined || typeof client.rewindWorkflow !== 'function') return 'fallback';
  const incarnationMs = status.updatedAt;
  const fromStep = await stepAfterLastCheckpoint(client, id);
  // The cut is right after the last recorded step, and the latest version is assumed to replay the steps
  // before it as the old one did (as a fork onto it assumes too): a same-path repair.
  const unsafe = await dataSourceRewindCheck(deps, log, [{ workflowId: id, fromStep }], true);
  if (unsafe) {
    log.notice('repairing by fork instead of rewind', { event: 'repair_fork_fallback', workflowId: id, why: unsafe });
    return 'fallback';
  }
  const { root, depth } = await lineageOf(client, id, status.forkedFrom);
  const prior = await rewindsOf(deps.db, root, { workflowId: id, incarnationMs });
  const done = await underRootLock(deps, root, async (): Promise<OrphanOutcome> => {
    if (depth + prior >= deps.maxForks) {
      await deadLetter(deps, { workflowId: id, root, forks: depth + prior, reason: 'orphaned-version', error: undefined }, log);
      return { workflowId: id, outcome: 'dead-lettered' };
    }
    const claim = await claimRewind(
      deps.db,
      {
        applicationName: deps.applicationName,
        root,
        forksBefore: depth,
        workflowId: id,
        incarnationMs,
        fromStep,
        applicationVersion: latest,
        reason: 'orphaned-version',
        divergedWorkflowId: undefined,
        detail: `version ${orphanedVersion ?? '(none)'} has no live executor; rewound onto ${latest}`,
        descendants: [],
        rewoundBy: deps.forkedBy ?? `${hostname()}:${process.pid}`,
      },
      deps.rewindClaimMs ?? DEFAULT_REWIND_CLAIM_MS,
    );
    if (claim.kind !== 'claimed')
      return { workflowId: id, outcome: claim.kind === 'done' ? 'skipped' : 'busy', why: `rewind ${claim.kind}` };
    const rewound = await finishOrphanRewind(deps, client, {
      workflowId: id,
      incarnationMs,
      fromStep,
      applicationVersion: latest,
      queue: queueOf(status),
    });
    return rewound ? { workflowId: id, outcome: 'rewound' } : { workflowId: id, outcome: 'skipped', why: 'moved on before the rewind' };
  });
  return done === 'busy' ? { workflowId: id, outcome: 'busy' } : done;
}

/**
 * Cancel (if still the ENQUEUED row the claim was made for), then rewind onto the target version (if
 * CANCELLED); marks the claim done. False when the workflow moved on (claimed, finished) in between:
 * then it is live or done, and neither step applies.
 */
async function finishOrphanRewind(
  deps: RepairDeps,
  client: ForkClient,
  r: { workflowId: string; incarnationMs: number; fromStep: number; applicationVersion: string | undefined; queue: QueueTarget },
): Promise<boolean> {
  const faults = deps.faults ?? noFaults;
  let now = await client.getWorkflow(r.workflowId);
  if (now?.status === 'ENQUEUED' && now.updatedAt === r.incarnationMs) {
    // DBOS's cancel (status NOT IN SUCCESS/ERROR): an old-version run that claimed it meanwhile parks at its next checkpoint.
    await client.cancelWorkflow(r.workflowId);
    if (faults.enabled) await faults.hit('rewind.afterCancel', { workflowId: r.workflowId });
    now = await client.getWorkflow(r.workflowId);
  }
  if (now?.status !== 'CANCELLED' || !client.rewindWorkflow) return false;
  await client.rewindWorkflow(r.workflowId, {
    startStep: r.fromStep,
    ...r.queue,
    ...(r.applicationVersion !== undefined ? { applicationVersion: r.applicationVersion } : {}),
  });
  await markRewound(deps.db, r.workflowId, r.incarnationMs);
  return true;
}

/**
 * Finishes orphaned-version rewinds whose claimer died after its ledger row (before or after the
 * cancel): the claim is taken over once stale and the rewind made. The cancel cleared the queue, so a
 * finished-late rewind runs on DBOS's internal queue. Idempotent; each orphaned-versions pass calls it.
 */
export async function finishOrphanRewinds(deps: RepairDeps, limit = 100): Promise<string[]> {
  const claimMs = deps.rewindClaimMs ?? DEFAULT_REWIND_CLAIM_MS;
  const rows = await staleOrphanRewinds(deps.db, deps.applicationName, claimMs, limit);
  if (!rows.length) return [];
  const client = await deps.dbos();
  const done: string[] = [];
  for (const row of rows) {
    const claim = await claimRewind(
      deps.db,
      {
        applicationName: deps.applicationName,
        root: row.root,
        forksBefore: 0,
        workflowId: row.workflowId,
        incarnationMs: row.incarnationMs,
        fromStep: row.fromStep,
        applicationVersion: row.applicationVersion,
        reason: 'orphaned-version',
        divergedWorkflowId: undefined,
        detail: undefined,
        descendants: [],
        rewoundBy: deps.forkedBy ?? `${hostname()}:${process.pid}`,
      },
      claimMs,
    );
    if (claim.kind !== 'claimed') continue;
    const ok = await finishOrphanRewind(deps, client, { ...row, queue: {} }).catch((err: unknown) => {
      deps.logger.error('could not finish an interrupted rewind onto the latest version; the next pass retries', {
        workflowId: row.workflowId,
        err,
        event: 'orphaned_version_fork_failed',
      });
      return false;
    });
    if (ok) done.push(row.workflowId);
  }
  if (done.length)
    deps.logger.notice('finished interrupted rewinds onto the latest version', { event: 'orphaned_version_forked', count: done.length });
  return done;
}
