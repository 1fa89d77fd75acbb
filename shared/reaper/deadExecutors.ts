import { findExecutors, listExecutors, type ExecutorRow } from '../db/queries/executors.js';
import { type Absence, executorsSeenBeating, recordAbsent, recordDeclaredDead, recordPresent, resetHeartbeatAbsences } from '../db/queries/observations.js';
import { canSeeOtherSessions, executorsWithSessions, lastActivityByExecutor, pendingOwners, sessionPrefix } from '../dbos/reaper.js';
import type { RecoveryGuard } from '../dbos/recovery.js';
import { BudgetExhaustedError, RowsLockedError } from '../errors.js';
import { deathNotice, type DeathNotice } from '../events/deathNotice.js';
import { publishDeathNotice } from '../events/publisher.js';
import { budgetUntil, type Budget } from '../lifecycle/deadline.js';
import { recoveryDeps } from '../recovery/deps.js';
import { recoverExecutor } from '../recovery/recoverExecutor.js';
import { type Beat, judgeKit, type RuleSettings, streakIsDeath } from './deathRule.js';
import { readBeats, readLocks } from './evidence.js';
import { forgetLocked, lockedRowsFreed, rememberLocked } from './lockedRows.js';
import type { DeadPassResult, ReaperDeps, ReaperState, TickContext } from './types.js';

/**
 * Dead executors. One with the kit is judged by its two witnesses, the liveness lock and the heartbeat
 * (shared/reaper/deathRule.ts); one without the kit is dead only when it has no session in
 * pg_stat_activity (on two or more ticks, and only if this role can see other roles' sessions) and its
 * PENDING workflows have been quiet for UNKNOWN_EXECUTOR_GRACE_MS. A false death runs step bodies twice
 * (docs/design.md#invariant-3-death-only-on-strong-evidence), so every doubt resolves to "alive". A death is re-checked just before acting and
 * again inside the recovery (the heartbeat at every batch boundary, the lock in every batch statement).
 */

/** A declared executor that still owns PENDING rows this much later is declared again (a lost notice). */
export const REDECLARE_AFTER_MS = 60_000;
/**
 * How long one tick may spend recovering a death inline before it hands the rest to executorDeath with a
 * notice: long enough for an executor's in-flight work (a few hundred rows take tens of ms), short enough
 * that other deaths are not kept waiting behind a large one.
 */
export const INLINE_RECOVERY_BUDGET_MS = 2_000;

type Evidence = 'liveness' | 'heartbeat' | 'sessions';
interface Death {
  executorId: string;
  evidence: Evidence;
  absence: Absence;
  cutoffMs?: number;
  staleBeatAt?: string;
  /** The process start the evidence was about (the registry's, at the time of the tick). */
  incarnation?: string;
}

export async function deadExecutorsPass(deps: ReaperDeps, ctx: TickContext, budget: Budget, state: ReaperState = {}): Promise<DeadPassResult> {
  const { db, config } = deps;
  const app = config.applicationName;
  const ttl = config.heartbeatTtlMs;
  // An absence streak survives a gap of this long between observations (a reaper hand-over, a database
  // blip); longer, and nobody knows whether the executor came back in between.
  const continuityMs = Math.max(3 * config.reaper.tickMs, ttl);
  const log = deps.logger.child({ pass: 'dead', tick: ctx.tick });

  const owners = await pendingOwners(db, app);
  const live = await listExecutors(db, app, ['alive', 'draining']);
  const versions = new Map<string, Set<string>>();
  const addVersion = (id: string, v: string | null) => {
    const set = versions.get(id) ?? new Set<string>();
    if (v !== null) set.add(v);
    versions.set(id, set);
  };
  for (const o of owners) addVersion(o.executorId, o.applicationVersion);
  for (const r of live) addVersion(r.executor_id, r.application_version);
  const candidates = [...versions.keys()];

  const result: DeadPassResult = {
    candidates: candidates.length,
    alive: 0,
    absent: 0,
    declared: [],
    published: 0,
    recoveredInline: 0,
    reenqueued: 0,
    reappeared: 0,
    activityResumed: 0,
    heartbeat: 'checked',
    liveness: 'checked',
    sessions: 'not-needed',
    liveOwners: [],
  };
  if (candidates.length === 0) return result;

  // Registry rows of every candidate (an owner of PENDING rows may be registered dead already).
  const registry = new Map<string, ExecutorRow>(live.map((r) => [r.executor_id, r]));
  const unregistered = candidates.filter((id) => !registry.has(id));
  if (unregistered.length) for (const r of await findExecutors(db, app, { executorIds: unregistered })) registry.set(r.executor_id, r);

  // 1. The witnesses. A Redis failure means "no heartbeat evidence this tick", never "absent".
  const withLock = candidates.filter((id) => registry.get(id)?.liveness === true);
  const [beats, locks] = await Promise.all([readBeats(deps, candidates), readLocks(deps, withLock)]);
  if ('skipped' in beats) {
    result.heartbeat = { skipped: beats.skipped };
    log.warn('heartbeat evidence unavailable: only a held liveness lock is read this tick', { reason: beats.skipped });
  } else if (beats.lostKeys) {
    // Flushed or restarted since the last tick: every key vanished at once and the kits are rewriting them.
    // A missing key is no evidence for a TTL from now (deathRule.absenceMeans); heartbeat streaks restart.
    await resetHeartbeatAbsences(db, app);
    result.heartbeat = { skipped: 'redis lost its keys since the last tick (flush or restart): absence counts from the next tick' };
    if (beats.firstSentinel) log.debug('first reaper sentinel in this redis: heartbeat absences count from the next tick');
    else log.warn('redis lost its keys (flush or restart): heartbeat absences restart', { event: 'redis_reset' });
  }
  if (!locks.freeIsEvidence && withLock.length) result.liveness = { skipped: locks.reason ?? 'unavailable' };
  const beatOf = (id: string): Beat | undefined => ('skipped' in beats ? undefined : beats.beats.get(id));
  // Kits that write heartbeats. A kit without Redis registers with `heartbeats = false`: the absence of a
  // key it never writes is no evidence, so it is judged like an executor without the kit (its held lock,
  // if any, still proves life).
  // A key present now proves a writer too, before the reaper has ever recorded one.
  const kit = new Set([
    ...[...registry.values()].filter((r) => r.heartbeats).map((r) => r.executor_id),
    ...candidates.filter((id) => beatOf(id)?.present),
    ...(await executorsSeenBeating(db, app, candidates.filter((id) => !registry.get(id)?.heartbeats))),
  ]);

  // 2. Executors with the kit: the death rule.
  const settings: RuleSettings = {
    nowMs: deps.clock(),
    intervalMs: config.heartbeatIntervalMs,
    ttlMs: ttl,
    redisKeptKeysMs: 'skipped' in beats ? undefined : beats.keptKeysMs,
  };
  const alive = new Set<string>();
  const suspects: Record<'liveness' | 'heartbeat', string[]> = { liveness: [], heartbeat: [] };
  for (const id of candidates) {
    if (!kit.has(id)) continue;
    const lock = locks.held.has(id) ? 'held' : registry.get(id)?.liveness && locks.freeIsEvidence ? 'free' : 'unavailable';
    const j = judgeKit({ lock, beat: beatOf(id) }, settings);
    if (j === 'alive') alive.add(id);
    else if (j === 'suspect-liveness') suspects.liveness.push(id);
    else if (j === 'suspect-heartbeat') suspects.heartbeat.push(id);
  }
  const keyed = [...alive].filter((id) => beatOf(id)?.present);
  await recordPresent(db, app, keyed, 'heartbeat');
  await recordPresent(db, app, [...alive].filter((id) => !beatOf(id)?.present), 'liveness');

  // A death declared within REDECLARE_AFTER_MS is acted on again only when rows its recovery left locked are free.
  const freed = await lockedRowsFreed(deps, state);
  const actionable = (a: Absence) => redeclarable(a) || freed.has(a.executorId);
  const dead: Death[] = [];
  for (const kind of ['liveness', 'heartbeat'] as const) {
    const absences = await recordAbsent(db, app, suspects[kind], kind, continuityMs);
    result.absent += absences.length;
    for (const a of absences) {
      if (!streakIsDeath(kind, a, config.heartbeatIntervalMs) || !actionable(a)) continue;
      const beat = beatOf(a.executorId);
      const staleBeatAt = beat?.present && beat.beatAt !== undefined ? new Date(beat.beatAt).toISOString() : undefined;
      const incarnation = registry.get(a.executorId)?.incarnation;
      dead.push({ executorId: a.executorId, evidence: kind, absence: a, ...(staleBeatAt ? { staleBeatAt } : {}), ...(incarnation ? { incarnation } : {}) });
    }
  }

  // 3. Executors that never heart-beat (no kit, or a kit without Redis): sessions and the activity clock.
  for (const id of candidates) if (!kit.has(id) && locks.held.has(id)) alive.add(id);
  await recordPresent(db, app, candidates.filter((id) => !kit.has(id) && locks.held.has(id)), 'liveness');
  const noKit = candidates.filter((id) => !kit.has(id) && !locks.held.has(id));
  if (noKit.length > 0) {
    if (config.reaper.sessionEvidence === 'none') {
      // Behind a pooler the executors' sessions do not carry DBOS's application_name, so "no session"
      // would read as absent for a live executor: the operator said not to trust it.
      result.sessions = 'unknown';
      log.warn('REAPER_SESSION_EVIDENCE=none: executors without the kit are not judged', { executors: noKit.length, event: 'sessions_unknown' });
    } else if (!(await canSeeOtherSessions(db))) {
      result.sessions = 'unknown';
      log.warn(
        "this database role cannot see other roles' sessions (needs pg_read_all_stats): executors without the kit are not judged",
        { executors: noKit.length, event: 'sessions_unknown' },
      );
    } else {
      result.sessions = 'visible';
      const withSessions = await executorsWithSessions(db, noKit);
      for (const id of withSessions) alive.add(id);
      await recordPresent(db, app, [...withSessions], 'sessions');
      const absences = await recordAbsent(db, app, noKit.filter((id) => !withSessions.has(id)), 'sessions', continuityMs);
      result.absent += absences.length;
      const quietCutoff = deps.clock() - config.reaper.unknownExecutorGraceMs;
      const judged = absences.filter((a) => a.absentTicks >= 2 && actionable(a));
      const last = await lastActivityByExecutor(db, app, judged.map((a) => a.executorId));
      for (const a of judged) {
        const at = last.get(a.executorId);
        if (at !== undefined && at < quietCutoff) dead.push({ executorId: a.executorId, evidence: 'sessions', absence: a, cutoffMs: quietCutoff });
      }
    }
  }
  result.alive = alive.size;
  result.liveOwners = [...alive];

  // 4. Act on each death, re-checking first the evidence that can change fastest.
  for (const d of dead) {
    if (ctx.signal?.aborted || budget.expired()) break;
    if (deps.faults.enabled) await deps.faults.hit('reaper.beforeDeclareDead', { executorId: d.executorId, evidence: d.evidence });
    if (d.evidence !== 'sessions') {
      const now = await recheck(deps, d, settings.intervalMs, ttl);
      if (now === 'unknown') {
        log.warn('redis stopped answering or lost its keys before the executor was declared dead: left for a later tick', { executorId: d.executorId });
        continue;
      }
      if (now === 'alive') {
        result.reappeared += 1;
        await recordPresent(db, app, [d.executorId], 'liveness');
        log.notice('the executor showed life before it was declared dead: left alone', { executorId: d.executorId, evidence: d.evidence });
        continue;
      }
    }
    await act(deps, ctx, budget, d, [...(versions.get(d.executorId) ?? [])], result, log, state);
  }
  return result;
}

/** The evidence again, for one executor, right before acting: 'dead' still, 'alive', or 'unknown'. */
async function recheck(deps: ReaperDeps, d: Death, intervalMs: number, ttlMs: number): Promise<'dead' | 'alive' | 'unknown'> {
  const [beats, locks] = await Promise.all([readBeats(deps, [d.executorId]), d.evidence === 'liveness' ? readLocks(deps, [d.executorId]) : undefined]);
  if ('skipped' in beats || beats.lostKeys) return 'unknown';
  const beat = beats.beats.get(d.executorId);
  const lock = locks?.held.has(d.executorId) ? 'held' : d.evidence === 'liveness' && locks?.freeIsEvidence ? 'free' : 'unavailable';
  const j = judgeKit({ lock, beat }, { nowMs: deps.clock(), intervalMs, ttlMs, redisKeptKeysMs: beats.keptKeysMs });
  if (j === 'alive') return 'alive';
  return j === `suspect-${d.evidence}` ? 'dead' : 'unknown';
}

async function act(
  deps: ReaperDeps,
  ctx: TickContext,
  budget: Budget,
  d: Death,
  applicationVersions: string[],
  result: DeadPassResult,
  log: ReaperDeps['logger'],
  state: ReaperState,
): Promise<void> {
  const { db, config } = deps;
  const app = config.applicationName;
  const detail = { evidence: d.evidence, absentMs: d.absence.absentMs, absentTicks: d.absence.absentTicks, applicationVersions };
  // The notice carries what the declaration rested on, so executorDeath's recovery re-checks the same.
  const notice = deathNotice({
    executorId: d.executorId,
    applicationName: app,
    applicationVersions,
    reason: 'heartbeat-lapsed',
    detectedBy: deps.detectedBy,
    ...(d.evidence !== 'sessions' ? { evidence: d.evidence } : {}),
    ...(d.staleBeatAt ? { staleBeatAt: d.staleBeatAt } : {}),
    ...(d.incarnation ? { incarnation: d.incarnation } : {}),
  });
  const publishable = d.evidence !== 'sessions' && deps.publisher !== undefined;
  if (ctx.dryRun) {
    const action = publishable && config.reaper.recovery === 'notice' ? 'declare-dead' : 'recover-inline';
    ctx.planned.push({ pass: 'dead', action, executorId: d.executorId, detail });
    return;
  }
  if (publishable && config.reaper.recovery === 'notice') {
    if (await publish(deps, notice, log)) {
      await recordDeclaredDead(db, app, d.executorId);
      result.declared.push(d.executorId);
      result.published += 1;
      log.notice('executor declared dead: death notice published', { executorId: d.executorId, event: 'executor_dead', ...detail });
      return;
    }
  }
  // No kit (the notice could not carry the guard its evidence needs), inline by choice, or publishing failed.
  const guard: RecoveryGuard | undefined =
    d.cutoffMs !== undefined ? { quietSinceMs: d.cutoffMs, noSessionsPrefix: sessionPrefix(d.executorId) } : undefined;
  // Capped only when executorDeath can take over the rest; otherwise the tick's own budget bounds it.
  const inline = publishable ? budgetUntil(Math.min(budget.deadline, deps.clock() + INLINE_RECOVERY_BUDGET_MS), deps.clock) : budget;
  let summary: Awaited<ReturnType<typeof recoverExecutor>>;
  try {
    summary = await recoverExecutor(
      recoveryDeps({ ...deps, logger: log }, { via: 'reaper', recoveredBy: deps.detectedBy }),
      notice,
      { budget: inline, ...(ctx.signal ? { signal: ctx.signal } : {}), ...(guard ? { guard } : {}) },
    );
  } catch (err) {
    if (err instanceof RowsLockedError) {
      // Everything else moved; the held rows wait for their transaction to end, and must not stall this
      // pass or any later one (the scan skips them). Declared now, so only a freed lock retries it early.
      rememberLocked(state, d.executorId, err.workflowIds);
      await recordDeclaredDead(db, app, d.executorId);
      result.declared.push(d.executorId);
      result.recoveredInline += 1;
      result.reenqueued += err.reenqueued;
      log.warn('executor declared dead: recovered inline except workflows another transaction holds', {
        executorId: d.executorId,
        event: 'executor_dead',
        reenqueued: err.reenqueued,
        locked: err.workflowIds.length,
        ...detail,
      });
      return;
    }
    if (!(err instanceof BudgetExhaustedError) || !publishable || ctx.signal?.aborted) throw err;
    // More than a tick's worth: executorDeath finishes what this tick started (the audit says partial).
    if (!(await publish(deps, notice, log))) throw err;
    await recordDeclaredDead(db, app, d.executorId);
    result.declared.push(d.executorId);
    result.published += 1;
    log.notice('executor declared dead: recovery begun inline, the rest handed to executorDeath', { executorId: d.executorId, event: 'executor_dead', ...detail });
    return;
  }
  forgetLocked(state, d.executorId);
  if (summary.outcome === 'false-alarm') {
    // Contradicted during the recovery: not a death, so not declared (and the registry was not marked).
    // Rows moved before a heartbeat came back stay counted, so the summary matches the audit.
    if (summary.contradictedBy === 'heartbeat') result.reappeared += 1;
    else result.activityResumed += 1;
    result.reenqueued += summary.reenqueued;
    log.notice('executor not declared dead: its evidence changed during the recovery', {
      executorId: d.executorId,
      contradictedBy: summary.contradictedBy,
      reenqueued: summary.reenqueued,
      event: 'executor_not_dead',
      ...detail,
    });
    return;
  }
  await recordDeclaredDead(db, app, d.executorId);
  result.declared.push(d.executorId);
  result.recoveredInline += 1;
  result.reenqueued += summary.reenqueued;
  log.notice('executor declared dead: recovered inline', { executorId: d.executorId, event: 'executor_dead', reenqueued: summary.reenqueued, ...detail });
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

function redeclarable(a: Absence): boolean {
  return a.declaredAgoMs === undefined || a.declaredAgoMs >= REDECLARE_AFTER_MS;
}
