import { findOrphanedEnqueued, type OrphanedRow } from '../dbos/orphaned.js';
import { unattributedSessions } from '../dbos/reaper.js';
import { errorMessage, readLiveVersions, DEFAULT_KEY_PREFIX } from '../../packages/executor/src/plane/index.js';
import {
  shouldStop,
  skip,
  type OrphanedPassResult,
  type PlannedAction,
  type ReaperDeps,
  type ReaperState,
  type Skipped,
  type TickContext,
} from './types.js';

/**
 * Orphaned versions (docs/design.md#invariant-2-recovery-re-enqueues-it-never-executes): ENQUEUED rows pinned to a version no live executor runs.
 * Recovery applies ORPHANED_VERSION_POLICY when it re-enqueues, but a fork that failed there, or rows
 * re-enqueued while no executor of their version was alive, would otherwise wait forever: DBOS claims only
 * exact version matches, and a redelivered death notice no longer finds them (they are not PENDING). This
 * pass finds them again once untouched for ORPHANED_VERSION_GRACE_MS and applies the same policy.
 *
 * Liveness comes from the heartbeats and the sessions; without them (Redis unreachable, unset, an unreadable
 * value whose version is unknown, or a session that names no executor) the pass is skipped, never run on
 * missing evidence.
 */

/** Orphaned rows handled per run; the rest wait for the next run (the longest-waiting go first). */
export const ORPHANED_BATCH = 100;

export const NOT_DUE = 'not due this tick';

/**
 * The pass runs on an invocation's first tick, then once every min(60 s, grace/5): the grace is minutes,
 * so finding a row a minute later changes nothing, and it keeps the scan of the in-flight rows off most ticks.
 */
export function orphanedDue(state: ReaperState, now: number, graceMs: number, tickMs: number): boolean {
  const every = Math.min(60_000, Math.max(tickMs, Math.floor(graceMs / 5)));
  return state.orphanedScannedAt === undefined || now - state.orphanedScannedAt >= every;
}

export function isNotDue(r: Skipped): boolean {
  return r.reason === NOT_DUE;
}

export async function orphanedVersionsPass(
  deps: ReaperDeps,
  ctx: TickContext,
  state: ReaperState = {},
): Promise<OrphanedPassResult | Skipped> {
  const { db, config } = deps;
  const app = config.applicationName;
  const { orphanedVersionGraceMs: graceMs, tickMs } = config.reaper;
  const policy = config.recovery.orphanedVersionPolicy;
  const log = deps.logger.child({ pass: 'orphaned', tick: ctx.tick });
  if (!orphanedDue(state, deps.clock(), graceMs, tickMs)) return skip(NOT_DUE);
  state.orphanedScannedAt = deps.clock();
  // Whatever the policy and the live versions now, a fork already made must not leave its original able
  // to run as a second lineage.
  if (!ctx.dryRun && deps.finishInterruptedForks) {
    await deps
      .finishInterruptedForks()
      .catch((err: unknown) =>
        log.error('could not cancel originals of interrupted forks', { err, event: 'orphaned_version_fork_failed' }),
      );
  }

  const live = await liveVersions(deps);
  if (!(live instanceof Set)) {
    log.warn('live versions unknown: orphaned versions not judged this tick', { reason: live.skipped });
    return skip(live.skipped);
  }
  const rows = await findOrphanedEnqueued(db, app, { liveVersions: [...live], graceMs, limit: ORPHANED_BATCH });
  // A process whose sessions name nobody (DBOS for Python's `dbos_transact`) may run any of these versions.
  const anon = rows.length > 0 ? (await unattributedSessions(db))[0] : undefined;
  if (anon !== undefined) {
    const skipped = `${anon.sessions} session(s) named ${JSON.stringify(anon.name)} name no executor: which versions run is unknown`;
    log.warn('live versions unknown: orphaned versions not judged this tick', { reason: skipped, candidates: rows.length });
    return skip(skipped);
  }
  const byVersion = groupBy(rows, (r) => r.applicationVersion);
  const result: OrphanedPassResult = {
    found: rows.length,
    versions: Object.fromEntries([...byVersion].map(([v, rs]) => [v, rs.length])),
    reported: 0,
    forked: 0,
    failed: 0,
    notForked: 0,
    workflowIds: rows.map((r) => r.workflowId),
  };
  for (const [applicationVersion, rs] of byVersion) {
    log.warn('ENQUEUED workflows of a version no live executor runs: they wait until one appears', {
      event: 'orphaned_version',
      applicationVersion,
      count: rs.length,
      policy,
      workflowIds: rs.slice(0, 10).map((r) => r.workflowId),
    });
  }
  result.reported = rows.length;
  if (rows.length === 0 || policy !== 'fork-to-latest') {
    if (ctx.dryRun) ctx.planned.push(...rows.map((r) => plan('report', r)));
    return result;
  }
  if (ctx.dryRun) {
    ctx.planned.push(...rows.map((r) => plan('fork', r)));
    return result;
  }
  if (!deps.repairOrphaned) {
    log.warn('orphaned-version workflows found; no fork module wired', { event: 'orphaned_version_fork_failed', count: rows.length });
    return { ...result, notForked: rows.length, skipped: 'no fork module wired' };
  }

  await repairVersions(deps, ctx, byVersion, result, log);
  return result;
}

/**
 * fork-to-latest: each version's rows to the repair module, one executor's rows at a time. The evidence
 * that changes fastest is re-read just before acting: an executor of the version may have started since
 * the scan (it would claim the rows itself).
 */
async function repairVersions(
  deps: ReaperDeps,
  ctx: TickContext,
  byVersion: Map<string, OrphanedRow[]>,
  result: OrphanedPassResult,
  log: ReaperDeps['logger'],
): Promise<void> {
  const repair = deps.repairOrphaned;
  if (!repair) return;
  const now = await liveVersions(deps);
  for (const [applicationVersion, rs] of byVersion) {
    if (shouldStop(ctx)) break;
    if (!(now instanceof Set) || now.has(applicationVersion)) {
      result.notForked += rs.length;
      log.notice('a live executor of the version appeared, or the heartbeats became unreadable, before the fork: left alone', {
        applicationVersion,
        ...(now instanceof Set ? {} : { reason: now.skipped }),
      });
      continue;
    }
    // repairOrphaned takes one executor's rows (its log names it); children and their parents share one.
    for (const [executorId, group] of groupBy(rs, (r) => r.executorId ?? '(none)')) {
      try {
        const outcomes = await repair({
          applicationName: deps.config.applicationName,
          executorId,
          applicationVersion,
          workflowIds: group.map((r) => r.workflowId),
        });
        for (const o of outcomes) {
          if (o.outcome === 'forked' || o.outcome === 'already-forked' || o.outcome === 'rewound') result.forked += 1;
          else if (o.outcome === 'failed') result.failed += 1;
          else result.notForked += 1;
        }
      } catch (err) {
        result.failed += group.length;
        log.error('fork-to-latest of orphaned-version workflows failed; the next run retries', {
          applicationVersion,
          executorId,
          err,
          event: 'orphaned_version_fork_failed',
        });
      }
    }
  }
}

function plan(action: 'report' | 'fork', r: OrphanedRow): PlannedAction {
  return {
    pass: 'orphaned',
    action,
    workflowId: r.workflowId,
    ...(r.executorId ? { executorId: r.executorId } : {}),
    detail: { applicationVersion: r.applicationVersion },
  };
}

function groupBy<T>(items: T[], key: (t: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const it of items) out.set(key(it), [...(out.get(key(it)) ?? []), it]);
  return out;
}

/** Versions of executors whose heartbeat says `alive`; `skipped` when the heartbeats or the sessions cannot say. */
async function liveVersions(deps: ReaperDeps): Promise<Set<string> | { skipped: string }> {
  if (!deps.redis) return { skipped: 'REDIS_URL is not set' };
  try {
    const live = await readLiveVersions(deps.redis, deps.config.applicationName, deps.config.redis?.keyPrefix ?? DEFAULT_KEY_PREFIX);
    // A key proves a live writer, but an unreadable value hides which version it runs.
    const [unknown] = live.unreadable;
    if (unknown !== undefined) return { skipped: `heartbeat of ${unknown} is unreadable: its version is unknown` };
    return live.versions;
  } catch (err) {
    return { skipped: `redis unreachable: ${errorMessage(err)}` };
  }
}
