import { listExecutors } from '../db/queries/executors.js';
import { type Absence, executorsSeenBeating, recordAbsent, recordDeclaredDead, recordPresent, resetHeartbeatAbsences } from '../db/queries/observations.js';
import { canSeeOtherSessions, executorsWithSessions, lastActivityByExecutor, pendingOwners, sessionPrefix } from '../dbos/reaper.js';
import type { RecoveryGuard } from '../dbos/recovery.js';
import { deathNotice } from '../events/deathNotice.js';
import { publishDeathNotice } from '../events/publisher.js';
import { heartbeatKey } from '../heartbeat/index.js';
import type { Budget } from '../lifecycle/deadline.js';
import { recoverExecutor } from '../resume/recoverExecutor.js';
import type { DeadPassResult, ReaperDeps, TickContext } from './types.js';

/**
 * Dead executors. An executor with the kit is dead when its heartbeat key has stayed absent for at least a
 * TTL, observed on two or more ticks; one without the kit is dead only when it has no session in
 * pg_stat_activity (on two or more ticks, and only if this role can see other roles' sessions) and its
 * PENDING workflows have been quiet for UNKNOWN_EXECUTOR_GRACE_MS. A false death runs step bodies twice
 * (DESIGN.md, invariant 3), so every doubt resolves to "alive".
 */

/** A declared executor that still owns PENDING rows this much later is declared again (a lost notice). */
export const REDECLARE_AFTER_MS = 60_000;

export async function deadExecutorsPass(deps: ReaperDeps, ctx: TickContext, budget: Budget): Promise<DeadPassResult> {
  const { db, config } = deps;
  const app = config.applicationName;
  const ttl = config.heartbeatTtlMs;
  // An absence streak survives a gap of this long between observations (the next Scheduler invocation);
  // longer, and nobody knows whether the executor came back in between.
  const continuityMs = Math.max(3 * config.reaper.tickMs, ttl);
  const log = deps.logger.child({ pass: 'dead', tick: ctx.tick });

  const owners = await pendingOwners(db, app);
  const registry = await listExecutors(db, app, ['alive', 'draining']);
  const versions = new Map<string, Set<string>>();
  const addVersion = (id: string, v: string | null) => {
    const set = versions.get(id) ?? new Set<string>();
    if (v !== null) set.add(v);
    versions.set(id, set);
  };
  for (const o of owners) addVersion(o.executorId, o.applicationVersion);
  for (const r of registry) addVersion(r.executor_id, r.application_version);
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
    sessions: 'not-needed',
    liveOwners: [],
  };
  if (candidates.length === 0) return result;

  // 1. Heartbeats. Any Redis failure means "no heartbeat evidence this tick", never "absent".
  const beating = await readBeats(deps, candidates);
  const live = new Set<string>();
  let kit: Set<string>;
  if (beating instanceof Set) {
    for (const id of beating) live.add(id);
    await recordPresent(db, app, [...beating], 'heartbeat');
    const missing = candidates.filter((id) => !beating.has(id));
    kit = new Set([...beatingKits(registry), ...(await executorsSeenBeating(db, app, missing))]);
  } else {
    result.heartbeat = { skipped: beating.skipped };
    log.warn('heartbeat evidence unavailable: no executor with the kit is judged this tick', { reason: beating.skipped });
    kit = new Set([...beatingKits(registry), ...(await executorsSeenBeating(db, app, candidates))]);
  }

  const dead: Array<{ executorId: string; evidence: 'heartbeat' | 'sessions'; absence: Absence; cutoffMs?: number }> = [];
  if (beating instanceof Set && beating.redisLostKeys) {
    // Flushed or restarted since the last tick: every key vanished at once and the kits are rewriting
    // them. Absence counts from the next tick, so only a kit silent for a whole TTL after that is dead.
    await resetHeartbeatAbsences(db, app);
    result.heartbeat = { skipped: 'redis lost its keys since the last tick (flush or restart): absence counts from the next tick' };
    log.warn('redis lost its keys (flush or restart): heartbeat absences restart', { event: 'redis_reset' });
  } else if (beating instanceof Set) {
    const absentKit = candidates.filter((id) => !beating.has(id) && kit.has(id));
    const absences = await recordAbsent(db, app, absentKit, 'heartbeat', continuityMs);
    result.absent += absences.length;
    for (const a of absences) if (a.absentMs >= ttl && a.absentTicks >= 2 && redeclarable(a)) dead.push({ executorId: a.executorId, evidence: 'heartbeat', absence: a });
  }

  // 2. Executors that never heart-beat (no kit): sessions and the activity clock.
  const noKit = candidates.filter((id) => !kit.has(id) && !live.has(id));
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
      for (const id of withSessions) live.add(id);
      await recordPresent(db, app, [...withSessions], 'sessions');
      const absences = await recordAbsent(db, app, noKit.filter((id) => !withSessions.has(id)), 'sessions', continuityMs);
      result.absent += absences.length;
      const quietCutoff = deps.clock() - config.reaper.unknownExecutorGraceMs;
      const judged = absences.filter((a) => a.absentTicks >= 2 && redeclarable(a));
      const last = await lastActivityByExecutor(db, app, judged.map((a) => a.executorId));
      for (const a of judged) {
        const at = last.get(a.executorId);
        if (at !== undefined && at < quietCutoff) dead.push({ executorId: a.executorId, evidence: 'sessions', absence: a, cutoffMs: quietCutoff });
      }
    }
  }
  result.alive = live.size;
  result.liveOwners = [...live];

  // 3. Act on each dead executor, re-checking the evidence that can change fastest first.
  for (const d of dead) {
    if (ctx.signal?.aborted || budget.expired()) break;
    if (deps.faults.enabled) await deps.faults.hit('reaper.beforeDeclareDead', { executorId: d.executorId, evidence: d.evidence });
    if (d.evidence === 'heartbeat') {
      const now = await readBeats(deps, [d.executorId]);
      if (!(now instanceof Set) || now.redisLostKeys) {
        log.warn('redis stopped answering or lost its keys before the executor was declared dead: left for a later tick', { executorId: d.executorId });
        continue;
      }
      if (now.has(d.executorId)) {
        result.reappeared += 1;
        await recordPresent(db, app, [d.executorId], 'heartbeat');
        log.notice('heartbeat reappeared before the executor was declared dead: left alone', { executorId: d.executorId });
        continue;
      }
    }
    const applicationVersions = [...(versions.get(d.executorId) ?? [])];
    const detail = { evidence: d.evidence, absentMs: d.absence.absentMs, absentTicks: d.absence.absentTicks, applicationVersions };
    if (d.evidence === 'heartbeat' && deps.publisher && !ctx.dryRun) {
      const notice = deathNotice({ executorId: d.executorId, applicationName: app, applicationVersions, reason: 'heartbeat-lapsed', detectedBy: deps.detectedBy });
      try {
        await publishDeathNotice(deps.publisher, config.topics.executorDeaths, notice);
        await recordDeclaredDead(db, app, d.executorId);
        result.declared.push(d.executorId);
        result.published += 1;
        log.notice('executor declared dead: death notice published', { executorId: d.executorId, event: 'executor_dead', ...detail });
        continue;
      } catch (err) {
        log.warn('publishing the death notice failed: recovering inline', { executorId: d.executorId, err });
      }
    }
    // No kit (the notice could not carry the guard its evidence needs), no publisher, or publishing failed.
    if (ctx.dryRun) {
      ctx.planned.push({ pass: 'dead', action: d.evidence === 'heartbeat' && deps.publisher ? 'declare-dead' : 'recover-inline', executorId: d.executorId, detail });
      continue;
    }
    const guard: RecoveryGuard | undefined =
      d.cutoffMs !== undefined ? { quietSinceMs: d.cutoffMs, noSessionsPrefix: sessionPrefix(d.executorId) } : undefined;
    const summary = await recoverExecutor(
      {
        db,
        redis: deps.redis,
        lock: deps.lock,
        logger: log,
        faults: deps.faults,
        batchSize: config.recovery.batchSize,
        lockTtlMs: config.recovery.lockTtlMs,
        recoveredBy: deps.detectedBy,
        ...(config.redis ? { keyPrefix: config.redis.keyPrefix } : {}),
      },
      deathNotice({ executorId: d.executorId, applicationName: app, applicationVersions, reason: 'heartbeat-lapsed', detectedBy: deps.detectedBy }),
      { budget, ...(ctx.signal ? { signal: ctx.signal } : {}), ...(guard ? { guard } : {}) },
    );
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
      continue;
    }
    await recordDeclaredDead(db, app, d.executorId);
    result.declared.push(d.executorId);
    result.recoveredInline += 1;
    result.reenqueued += summary.reenqueued;
    log.notice('executor declared dead: recovered inline', { executorId: d.executorId, event: 'executor_dead', reenqueued: summary.reenqueued, ...detail });
  }
  return result;
}

function redeclarable(a: Absence): boolean {
  return a.declaredAgoMs === undefined || a.declaredAgoMs >= REDECLARE_AFTER_MS;
}

/** The set of candidates with a heartbeat key, plus whether Redis lost its keys since the last tick. */
type Beats = Set<string> & { redisLostKeys?: boolean };

/**
 * Which candidates have a heartbeat key, in one round trip; `skipped` when Redis cannot say. A sentinel key
 * without TTL (SET NX) tells a flushed or restarted Redis apart from executors that stopped beating: if it
 * is missing, every absence this tick is the flush's, not the executors'.
 */
async function readBeats(deps: ReaperDeps, ids: string[]): Promise<Beats | { skipped: string }> {
  if (!deps.redis) return { skipped: 'REDIS_URL is not set' };
  const prefix = deps.config.redis?.keyPrefix ?? 'afterlife';
  const sentinel = `${prefix}:${deps.config.applicationName}:reaper:sentinel`;
  try {
    const replies = await deps.redis
      .multi()
      .set(sentinel, new Date().toISOString(), 'NX')
      .mget(...ids.map((id) => heartbeatKey(deps.config.applicationName, id, prefix)))
      .exec();
    if (!replies) throw new Error('transaction aborted');
    const [[setErr, created], [getErr, values]] = replies as [[Error | null, unknown], [Error | null, Array<string | null>]];
    if (setErr || getErr) throw setErr ?? getErr;
    // Any value proves life: an unparsable one is still a key the kit refreshed within its TTL.
    const out: Beats = new Set(ids.filter((_, i) => values[i] !== null && values[i] !== undefined));
    out.redisLostKeys = created === 'OK';
    return out;
  } catch (err) {
    return { skipped: `redis unreachable: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/**
 * Registered kits that write heartbeats. A kit running without Redis registers with `heartbeats = false`:
 * the absence of a key it never writes is no evidence, so it is judged like an executor without the kit.
 */
function beatingKits(registry: ReadonlyArray<{ executor_id: string; heartbeats: boolean }>): string[] {
  return registry.filter((r) => r.heartbeats).map((r) => r.executor_id);
}
