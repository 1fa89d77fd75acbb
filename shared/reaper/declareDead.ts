import { type Absence, recordDeclaredDead } from '../db/queries/observations.js';
import { observations } from './observe.js';
import { sessionPrefix } from '../dbos/reaper.js';
import type { RecoveryGuard } from '../dbos/recovery.js';
import type { SignOfLife } from '../db/queries/recoveries.js';
import {
  BudgetExhaustedError,
  deathNotice,
  type DeathNotice,
  publishDeathNotice,
  RowsLockedError,
} from '../../packages/executor/src/plane/index.js';
import { budgetUntil, type Budget } from '../lifecycle/deadline.js';
import { recoveryDeps } from '../recovery/deps.js';
import { recoverExecutor, type RecoverySummary } from '../recovery/recoverExecutor.js';
import { isStale, judgeKit } from './deathRule.js';
import { readBeats, readLocks } from './evidence.js';
import { forgetLocked, rememberLocked } from './lockedRows.js';
import type { DeadPassResult, ReaperDeps, ReaperState, TickContext } from './types.js';

/**
 * The dead-executors pass's last step (deadExecutors.ts judges, this acts): each death is re-checked on
 * the evidence that changes fastest, then declared with a notice executorDeath recovers, or recovered
 * inline (no kit, REAPER_RECOVERY=inline, or publishing failed), and counted in the pass's result.
 */

/**
 * How long one tick may spend recovering a death inline before it hands the rest to executorDeath with a
 * notice: long enough for an executor's in-flight work (a few hundred rows take tens of ms), short enough
 * that other deaths are not kept waiting behind a large one.
 */
export const INLINE_RECOVERY_BUDGET_MS = 2_000;

export type Evidence = 'liveness' | 'heartbeat' | 'sessions';
export interface Death {
  executorId: string;
  evidence: Evidence;
  absence: Absence;
  cutoffMs?: number;
  staleBeatAt?: string;
  /** The process start the evidence was about (the registry's, at the time of the tick). */
  incarnation?: string;
  /** Declared on the liveness lock alone because Redis could not judge (deadExecutors.REDIS_BLIND_FALLBACK_MS). */
  blind?: true;
  /** The last session or checkpoint the reaper saw of an executor without the kit: its timeline's start. */
  signOfLife?: SignOfLife;
}

/** What acting needs from the pass. */
export interface Acting {
  deps: ReaperDeps;
  ctx: TickContext;
  budget: Budget;
  state: ReaperState;
  log: ReaperDeps['logger'];
  result: DeadPassResult;
  /** Versions each candidate runs or owns PENDING rows of, for the notice. */
  versions: Map<string, Set<string>>;
}

type Detail = { evidence: Evidence; absentMs: number; absentTicks: number; applicationVersions: string[] };

/** Acts on each death, re-checking first the evidence that can change fastest. */
export async function actOnDeaths(a: Acting, dead: Death[], rule: { intervalMs: number; ttlMs: number }): Promise<void> {
  const { deps, log, result } = a;
  for (const d of dead) {
    if (a.ctx.signal?.aborted || a.budget.expired()) break;
    if (deps.faults.enabled) await deps.faults.hit('reaper.beforeDeclareDead', { executorId: d.executorId, evidence: d.evidence });
    if (d.evidence !== 'sessions') {
      const now = await recheck(deps, d, rule.intervalMs, rule.ttlMs);
      if (now === 'unknown') {
        log.warn('redis stopped answering or lost its keys before the executor was declared dead: left for a later tick', {
          executorId: d.executorId,
        });
        continue;
      }
      if (now === 'alive') {
        result.reappeared += 1;
        await observations(deps, a.ctx, a.state).present([d.executorId], 'liveness');
        log.notice('the executor showed life before it was declared dead: left alone', { executorId: d.executorId, evidence: d.evidence });
        continue;
      }
    }
    await act(a, d, [...(a.versions.get(d.executorId) ?? [])]);
  }
}

/** The evidence again, for one executor, right before acting: 'dead' still, 'alive', or 'unknown'. */
async function recheck(deps: ReaperDeps, d: Death, intervalMs: number, ttlMs: number): Promise<'dead' | 'alive' | 'unknown'> {
  const [beats, locks] = await Promise.all([
    readBeats(deps, [d.executorId]),
    d.evidence === 'liveness' ? readLocks(deps, [d.executorId]) : undefined,
  ]);
  const lock = locks?.held.has(d.executorId) ? 'held' : d.evidence === 'liveness' && locks?.freeIsEvidence ? 'free' : 'unavailable';
  if (d.blind) {
    // Redis still cannot judge (or can): a held lock or a fresh beat is life, a lock still free is the death.
    if (lock === 'held') return 'alive';
    const b = 'skipped' in beats ? undefined : beats.beats.get(d.executorId);
    const fresh = b?.present === true && !isStale(b, { nowMs: deps.clock(), intervalMs, ttlMs, redisKeptKeysMs: undefined });
    return fresh ? 'alive' : lock === 'free' ? 'dead' : 'unknown';
  }
  if ('skipped' in beats || beats.lostKeys) return 'unknown';
  const beat = beats.beats.get(d.executorId);
  const j = judgeKit({ lock, beat }, { nowMs: deps.clock(), intervalMs, ttlMs, redisKeptKeysMs: beats.keptKeysMs });
  if (j === 'alive') return 'alive';
  return j === `suspect-${d.evidence}` ? 'dead' : 'unknown';
}

/** One death: planned (dry run), declared with a notice, or recovered inline. */
async function act(a: Acting, d: Death, applicationVersions: string[]): Promise<void> {
  const { deps, log } = a;
  const detail: Detail = { evidence: d.evidence, absentMs: d.absence.absentMs, absentTicks: d.absence.absentTicks, applicationVersions };
  const notice = noticeOf(deps, d, applicationVersions);
  const publishable = d.evidence !== 'sessions' && deps.publisher !== undefined;
  const byNotice = publishable && deps.config.reaper.recovery === 'notice';
  if (a.ctx.dryRun) {
    a.ctx.planned.push({ pass: 'dead', action: byNotice ? 'declare-dead' : 'recover-inline', executorId: d.executorId, detail });
    return;
  }
  if (byNotice && (await publish(deps, notice, log))) {
    await declare(a, d.executorId, 'published');
    log.notice('executor declared dead: death notice published', { executorId: d.executorId, event: 'executor_dead', ...detail });
    return;
  }
  // No kit (the notice could not carry the guard its evidence needs), inline by choice, or publishing failed.
  const summary = await recoverInline(a, d, notice, publishable, detail);
  if (summary) await concludeInline(a, d.executorId, summary, detail);
}

/** The notice carries what the declaration rested on, so executorDeath's recovery re-checks the same. */
function noticeOf(deps: ReaperDeps, d: Death, applicationVersions: string[]): DeathNotice {
  return deathNotice({
    executorId: d.executorId,
    applicationName: deps.config.applicationName,
    applicationVersions,
    reason: 'heartbeat-lapsed',
    detectedBy: deps.detectedBy,
    evidence: d.evidence,
    ...(d.staleBeatAt ? { staleBeatAt: d.staleBeatAt } : {}),
    ...(d.incarnation ? { incarnation: d.incarnation } : {}),
  });
}

/** The recovery in this tick; undefined when it ended declared another way (rows held, or handed over). */
async function recoverInline(
  a: Acting,
  d: Death,
  notice: DeathNotice,
  publishable: boolean,
  detail: Detail,
): Promise<RecoverySummary | undefined> {
  const { deps, ctx, budget, log } = a;
  const guard: RecoveryGuard | undefined =
    d.cutoffMs !== undefined ? { quietSinceMs: d.cutoffMs, noSessionsPrefix: sessionPrefix(d.executorId) } : undefined;
  // Capped only when executorDeath can take over the rest; otherwise the tick's own budget bounds it.
  const inline = publishable ? budgetUntil(Math.min(budget.deadline, deps.clock() + INLINE_RECOVERY_BUDGET_MS), deps.clock) : budget;
  try {
    return await recoverExecutor(recoveryDeps({ ...deps, logger: log }, { via: 'reaper', recoveredBy: deps.detectedBy }), notice, {
      budget: inline,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
      ...(guard ? { guard } : {}),
      ...(d.signOfLife ? { signOfLife: d.signOfLife } : {}),
    });
  } catch (err) {
    if (err instanceof RowsLockedError) {
      // Everything else moved; the held rows wait for their transaction to end, and must not stall this
      // pass or any later one (the scan skips them). Declared now, so only a freed lock retries it early.
      rememberLocked(a.state, d.executorId, err.workflowIds);
      await declare(a, d.executorId, 'inline', err.reenqueued);
      log.warn('executor declared dead: recovered inline except workflows another transaction holds', {
        executorId: d.executorId,
        event: 'executor_dead',
        reenqueued: err.reenqueued,
        locked: err.workflowIds.length,
        ...detail,
      });
      return undefined;
    }
    if (!(err instanceof BudgetExhaustedError) || !publishable || ctx.signal?.aborted) throw err;
    // More than a tick's worth: executorDeath finishes what this tick started (the audit says partial).
    if (!(await publish(deps, notice, log))) throw err;
    await declare(a, d.executorId, 'published');
    log.notice('executor declared dead: recovery begun inline, the rest handed to executorDeath', {
      executorId: d.executorId,
      event: 'executor_dead',
      ...detail,
    });
    return undefined;
  }
}

/** An inline recovery that ran to its end: declared, or not a death after all. */
async function concludeInline(a: Acting, executorId: string, summary: RecoverySummary, detail: Detail): Promise<void> {
  const { result, log } = a;
  forgetLocked(a.state, executorId);
  if (summary.outcome === 'false-alarm') {
    // Contradicted during the recovery: not a death, so not declared (and the registry was not marked).
    // Rows moved before a heartbeat came back stay counted, so the summary matches the audit.
    if (summary.contradictedBy === 'heartbeat') result.reappeared += 1;
    else result.activityResumed += 1;
    result.reenqueued += summary.reenqueued;
    log.notice('executor not declared dead: its evidence changed during the recovery', {
      executorId,
      contradictedBy: summary.contradictedBy,
      reenqueued: summary.reenqueued,
      event: 'executor_not_dead',
      ...detail,
    });
    return;
  }
  await declare(a, executorId, 'inline', summary.reenqueued);
  log.notice('executor declared dead: recovered inline', { executorId, event: 'executor_dead', reenqueued: summary.reenqueued, ...detail });
}

/** Recorded as declared, and counted as published or as recovered inline (with the rows it moved). */
async function declare(a: Acting, executorId: string, how: 'published' | 'inline', reenqueued = 0): Promise<void> {
  await recordDeclaredDead(a.deps.db, a.deps.config.applicationName, executorId);
  a.result.declared.push(executorId);
  if (how === 'published') {
    a.result.published += 1;
    return;
  }
  a.result.recoveredInline += 1;
  a.result.reenqueued += reenqueued;
}

async function publish(deps: ReaperDeps, notice: DeathNotice, log: ReaperDeps['logger']): Promise<boolean> {
  if (!deps.publisher) return false;
  try {
    await publishDeathNotice(deps.publisher, deps.config.topics.executorDeaths, notice);
    return true;
  } catch (err) {
    log.warn('publishing the death notice failed: recovering inline', { executorId: notice.executorId, err });
    return false;
  }
}
