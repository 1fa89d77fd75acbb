import { type ExecutorRow, findExecutors, LogThrottle } from '../../packages/executor/src/plane/index.js';
import { type Absence, executorsSeenBeating } from '../db/queries/observations.js';
import { executorsWithSessions, lastActivityByExecutor, pendingOwners } from '../dbos/reaper.js';
import { type Beat, judgeKit, type RuleSettings, streakIsDeath } from './deathRule.js';
import { type Acting, actOnDeaths, type Death } from './declareDead.js';
import { type Beats, type LockEvidence, readBeats } from './evidence.js';
import { type Census, reportUnattributed, unattributedCensus } from './unattributed.js';
import { type FleetTick, forgetDeclared, keepView, readLocksWatched, watchedObservations, watchFleet } from './fleetView.js';
import { lockedRowsFreed } from './lockedRows.js';
import { observations, type Observations } from './observe.js';
import type { DeadPassResult, ReaperDeps, ReaperState, TickContext } from './types.js';
import type { SignOfLife } from '../db/queries/recoveries.js';

/**
 * Dead executors. One with the kit is judged by its two witnesses, the liveness lock and the heartbeat
 * (shared/reaper/deathRule.ts); one without the kit is dead only when no session names it in
 * pg_stat_activity (on two or more ticks, only if this role can see other roles' sessions, and only while
 * no session that names nobody is open: unattributed.ts) and its PENDING workflows have been quiet for
 * UNKNOWN_EXECUTOR_GRACE_MS. A false death runs step bodies twice
 * (docs/design.md#invariant-3-death-only-on-strong-evidence), so every doubt resolves to "alive". A death is
 * re-checked just before acting and again inside the recovery (the heartbeat at every batch boundary, the lock
 * or the sessions in every batch statement).
 */

const resetReports = new LogThrottle(10_000);

/**
 * How long a kit's liveness lock may stay free while Redis cannot judge its heartbeat (unreachable, or its
 * keys lost so lately that an absence is no evidence yet) before the lock alone decides. The
 * lease (8 s by default) already ends a frozen or lost process's session; a kit that lost only its session
 * takes its lock back within a second. So a lock free this long is a dead process, whatever Redis says;
 * declared with a WARNING naming why Redis could not judge. Bound: this plus two ticks after the lock freed.
 */
export const REDIS_BLIND_FALLBACK_MS = 10_000;

/** A declared executor that still owns PENDING rows this much later is declared again (a lost notice). */
export const REDECLARE_AFTER_MS = 60_000;

/** What the pass knows as it goes: the candidates, their registry rows, and the verdicts so far. */
interface Pass extends Acting {
  app: string;
  /**
   * An absence streak survives a gap of this long between observations (a reaper hand-over, a database
   * blip); longer, and nobody knows whether the executor came back in between.
   */
  continuityMs: number;
  candidates: string[];
  registry: Map<string, ExecutorRow>;
  alive: Set<string>;
  dead: Death[];
  /** Where presence and absence are recorded (nowhere persistent in a dry run). */
  seen: Observations;
}

/**
 * What the kits' judgement hands on to the judges after it: whether an absence may be acted on (not declared
 * lately, or rows its recovery left locked are free). Taken as a parameter, so no judge can run before it.
 */
interface KitsJudged {
  actionable: (a: Absence) => boolean;
}

/** The two witnesses as read this tick, and which candidates write heartbeats at all. */
interface Witnesses {
  beats: Beats | { skipped: string };
  locks: LockEvidence;
  beatOf: (id: string) => Beat | undefined;
  kit: Set<string>;
  settings: RuleSettings;
}

export async function deadExecutorsPass(deps: ReaperDeps, ctx: TickContext, state: ReaperState = {}): Promise<DeadPassResult> {
  // Three reads that need nothing of one another, side by side: on a busy host a tick's time is mostly its
  // round trips' waits for a CPU, not the server's work. The registry as of this tick: read whole on an
  // invocation's first tick, then only what changed (fleetView.ts). Sessions that name no executor are looked
  // for even before such an executor owns work (unattributed.ts).
  const reads = [
    watchFleet(deps, state),
    pendingOwners(deps.db, deps.config.applicationName),
    unattributedCensus(deps, state, { now: false }),
  ] as const;
  // All ended before any failure is thrown: none is left running on a pooled connection into the next tick.
  await Promise.allSettled(reads);
  const [fleet, owners, census] = await Promise.all(reads);
  const live = [...fleet.view.live.values()];
  const versions = ownersAndVersions(owners, live);
  const candidates = [...versions.keys()];
  const result = emptyResult(candidates.length);
  if (census && 'sessions' in census)
    reportUnattributed(deps, census.sessions, { blocking: false, log: deps.logger.child({ pass: 'dead', tick: ctx.tick }) });
  if (candidates.length === 0) {
    keepView(state, fleet);
    return result;
  }
  const log = deps.logger.child({ pass: 'dead', tick: ctx.tick });
  const p: Pass = {
    deps,
    ctx,
    budget: ctx.budget,
    state,
    log,
    result,
    versions,
    candidates,
    app: deps.config.applicationName,
    continuityMs: Math.max(3 * deps.config.reaper.tickMs, deps.config.heartbeatTtlMs),
    registry: await registryOf(deps, live, candidates),
    alive: new Set(),
    dead: [],
    seen: watchedObservations(observations(deps, ctx, state), fleet),
  };
  const w = await readWitnesses(p, fleet); // 1. the witnesses
  const kits = await judgeKits(p, w); // 2. executors with the kit: the death rule
  await judgeWithoutKit(p, w, census, kits); // 3. executors that never heart-beat: sessions and the activity clock
  result.alive = p.alive.size;
  result.liveOwners = [...p.alive];
  await actOnDeaths(p, p.dead, { intervalMs: w.settings.intervalMs, ttlMs: deps.config.heartbeatTtlMs }); // 4. act
  forgetDeclared(fleet, result.declared);
  keepView(state, fleet);
  return result;
}

/** Candidates: owners of PENDING rows and registered live executors, with the versions each runs or owns. */
function ownersAndVersions(
  owners: Array<{ executorId: string; applicationVersion: string | null }>,
  live: ExecutorRow[],
): Map<string, Set<string>> {
  const versions = new Map<string, Set<string>>();
  const addVersion = (id: string, v: string | null) => {
    const set = versions.get(id) ?? new Set<string>();
    if (v !== null) set.add(v);
    versions.set(id, set);
  };
  for (const o of owners) addVersion(o.executorId, o.applicationVersion);
  for (const r of live) addVersion(r.executor_id, r.application_version);
  return versions;
}

function emptyResult(candidates: number): DeadPassResult {
  return {
    candidates,
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
    unknown: 0,
    liveOwners: [],
  };
}

/** When the earliest candidate's process started (the registry's), or undefined when any one is unknown. */
function earliestStart(registry: Map<string, ExecutorRow>, candidates: string[]): number | undefined {
  let earliest = Infinity;
  for (const id of candidates) {
    const at = registry.get(id)?.started_at?.getTime();
    if (at === undefined) return undefined;
    earliest = Math.min(earliest, at);
  }
  return Number.isFinite(earliest) ? earliest : undefined;
}

/** Registry rows of every candidate (an owner of PENDING rows may be registered dead already). */
async function registryOf(deps: ReaperDeps, live: ExecutorRow[], candidates: string[]): Promise<Map<string, ExecutorRow>> {
  const registry = new Map<string, ExecutorRow>(live.map((r) => [r.executor_id, r]));
  const unregistered = candidates.filter((id) => !registry.has(id));
  if (unregistered.length)
    for (const r of await findExecutors(deps.db, deps.config.applicationName, { executorIds: unregistered }))
      registry.set(r.executor_id, r);
  return registry;
}

/**
 * Liveness locks, then heartbeats. A Redis failure means "no heartbeat evidence this tick", never "absent".
 * A held lock is life whatever Redis says, so heartbeats are read for the executors whose lock is not held
 * (free, squatted, or no lock at all) — and for every candidate on a full tick (fleetView.ts).
 */
async function readWitnesses(p: Pass, fleet: FleetTick): Promise<Witnesses> {
  const { deps, registry, candidates, result, log } = p;
  const withLock = candidates.filter((id) => registry.get(id)?.liveness === true);
  const locks = await readLocksWatched(deps, fleet, withLock, registry);
  const unheld = fleet.full ? candidates : candidates.filter((id) => !locks.held.has(id));
  const beats = await readBeats(deps, unheld, { kitsStartedAt: earliestStart(registry, candidates) });
  if ('skipped' in beats) {
    result.heartbeat = { skipped: beats.skipped };
    log.warn('heartbeat evidence unavailable: only a held liveness lock is read this tick', { reason: beats.skipped });
  } else if (beats.lostKeys) {
    // Flushed or restarted since the last tick: every key vanished at once and the kits are rewriting them.
    // A missing key is no evidence for a TTL from now (deathRule.absenceMeans); heartbeat streaks restart.
    await p.seen.resetHeartbeat();
    const why =
      beats.change === 'restarted'
        ? 'redis restarted or failed over (its run_id changed)'
        : beats.change === 'young'
          ? `this plane first sees a redis that started ${Math.round(beats.uptimeMs / 1000)} s ago, after the kits it serves: a restart before this plane looked`
          : "redis was flushed (the reaper's sentinel is gone; or a client with the Redis URL deleted it)";
    result.heartbeat = {
      skipped: `redis ${beats.change === 'young' ? 'may have lost its keys' : 'lost its keys since the last tick'} (${why}): absence counts from the next tick`,
    };
    // Once per 10 s per app: a client deleting the sentinel makes every tick a "loss" (bounded by the fallback below).
    if (resetReports.pass(p.app).log)
      log.warn(`redis ${beats.change === 'young' ? 'may have lost' : 'lost'} its keys (${why}): heartbeat absences restart`, {
        event: 'redis_reset',
        change: beats.change,
      });
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
    ...(await executorsSeenBeating(
      deps.db,
      p.app,
      unheld.filter((id) => !registry.get(id)?.heartbeats),
    )),
  ]);
  const settings: RuleSettings = {
    nowMs: deps.clock(),
    intervalMs: deps.config.heartbeatIntervalMs,
    ttlMs: deps.config.heartbeatTtlMs,
    redisKeptKeysMs: 'skipped' in beats ? undefined : beats.keptKeysMs,
  };
  return { beats, locks, beatOf, kit, settings };
}

/** The death rule for each kit: alive recorded present, suspects' absence streaks recorded, deaths listed. */
async function judgeKits(p: Pass, w: Witnesses): Promise<KitsJudged> {
  const { deps, registry, alive } = p;
  const suspects: Record<'liveness' | 'heartbeat', string[]> = { liveness: [], heartbeat: [] };
  const blind: string[] = [];
  for (const id of p.candidates) {
    if (!w.kit.has(id)) continue;
    const lock = w.locks.held.has(id) ? 'held' : registry.get(id)?.liveness && w.locks.freeIsEvidence ? 'free' : 'unavailable';
    const j = judgeKit({ lock, beat: w.beatOf(id) }, w.settings);
    if (j === 'alive') alive.add(id);
    else if (j === 'suspect-liveness') suspects.liveness.push(id);
    else if (j === 'suspect-heartbeat') suspects.heartbeat.push(id);
    else if (lock === 'free') blind.push(id);
  }
  const keyed = [...alive].filter((id) => w.beatOf(id)?.present);
  await p.seen.present(keyed, 'heartbeat');
  await p.seen.present(
    [...alive].filter((id) => !w.beatOf(id)?.present),
    'liveness',
  );

  // A death declared within REDECLARE_AFTER_MS is acted on again only when rows its recovery left locked are free.
  const freed = await lockedRowsFreed(deps, p.state);
  const actionable = (a: Absence) => redeclarable(a) || freed.has(a.executorId);
  for (const kind of ['liveness', 'heartbeat'] as const) {
    const absences = await p.seen.absent(suspects[kind], kind, p.continuityMs);
    p.result.absent += absences.length;
    for (const a of absences) {
      if (!streakIsDeath(kind, a, deps.config.heartbeatIntervalMs) || !actionable(a)) continue;
      const beat = w.beatOf(a.executorId);
      const staleBeatAt = beat?.present && beat.beatAt !== undefined ? new Date(beat.beatAt).toISOString() : undefined;
      const incarnation = registry.get(a.executorId)?.incarnation;
      p.dead.push({
        executorId: a.executorId,
        evidence: kind,
        absence: a,
        ...(staleBeatAt ? { staleBeatAt } : {}),
        ...(incarnation ? { incarnation } : {}),
      });
    }
  }
  await judgeBlind(p, w, blind, actionable);
  return { actionable };
}

/**
 * Kits whose lock is free while Redis cannot judge their heartbeat (unreachable, or its keys lost too lately
 * for an absence to count): the lock alone decides once it has been free REDIS_BLIND_FALLBACK_MS, with a
 * WARNING naming why Redis could not judge. Never "never": a client that deletes the reaper's
 * sentinel every tick, or a Redis that stays down, delays a death by this bound, not for ever.
 */
async function judgeBlind(p: Pass, w: Witnesses, blind: string[], actionable: KitsJudged['actionable']): Promise<void> {
  if (blind.length === 0) return;
  const absences = await p.seen.absent(blind, 'liveness', p.continuityMs);
  p.result.absent += absences.length;
  const why =
    'skipped' in w.beats
      ? w.beats.skipped
      : `redis has kept its keys for only ${Math.round((w.settings.redisKeptKeysMs ?? 0) / 100) / 10} s, under the heartbeat TTL, so a missing key is no evidence yet${w.beats.change ? ` (${w.beats.change})` : ''}`;
  for (const a of absences) {
    if (a.absentTicks < 2 || a.absentMs < REDIS_BLIND_FALLBACK_MS || !actionable(a)) continue;
    p.log.warn(
      "the heartbeat cannot judge this executor and its liveness lock has stayed free: declared dead on Postgres's evidence alone",
      {
        executorId: a.executorId,
        event: 'redis_witness_blind',
        reason: why,
        lockFreeMs: a.absentMs,
        boundMs: REDIS_BLIND_FALLBACK_MS,
      },
    );
    const incarnation = p.registry.get(a.executorId)?.incarnation;
    p.dead.push({ executorId: a.executorId, evidence: 'liveness', absence: a, blind: true, ...(incarnation ? { incarnation } : {}) });
  }
}

/**
 * Executors that never heart-beat (no kit, or a kit without Redis): a held lock, sessions and the activity
 * clock. Session evidence counts only where sessions name the executor: when this role cannot see other
 * sessions, when the operator said not to trust them, or while a session that names nobody is open (DBOS for
 * Python's `dbos_transact`), the rest are unknown — counted, said, never declared.
 */
async function judgeWithoutKit(p: Pass, w: Witnesses, census: Census | undefined, kits: KitsJudged): Promise<void> {
  const { deps, result, log } = p;
  const held = p.candidates.filter((id) => !w.kit.has(id) && w.locks.held.has(id));
  for (const id of held) p.alive.add(id);
  await p.seen.present(held, 'liveness');
  const noKit = p.candidates.filter((id) => !w.kit.has(id) && !w.locks.held.has(id));
  if (noKit.length === 0) return;
  const unknown = (why: string, event: string) => {
    result.sessions = 'unknown';
    result.unknown = noKit.length;
    log.warn(`executors without the kit are not judged: ${why}`, { executors: noKit.length, event });
  };
  if (deps.config.reaper.sessionEvidence === 'none') {
    // Behind a pooler the executors' sessions do not carry DBOS's application_name, so "no session"
    // would read as absent for a live executor: the operator said not to trust it.
    unknown('REAPER_SESSION_EVIDENCE=none', 'sessions_unknown');
    return;
  }
  const seen = census ?? (await unattributedCensus(deps, p.state, { now: true }));
  if (seen === undefined || 'invisible' in seen) {
    unknown("this database role cannot see other roles' sessions (needs pg_read_all_stats)", 'sessions_unknown');
  } else if (seen.sessions.length > 0) {
    // A session naming the executor is still life; the others are unknown, and the WARNING names the fix.
    reportUnattributed(deps, seen.sessions, { blocking: true, log });
    const withSessions = await executorsWithSessions(deps.db, noKit);
    for (const id of withSessions) p.alive.add(id);
    await p.seen.present([...withSessions], 'sessions');
    result.sessions = 'unknown';
    result.unknown = noKit.length - withSessions.size;
  } else {
    result.sessions = 'visible';
    await judgeSessions(p, noKit, kits.actionable);
  }
}

/**
 * No session on two ticks and PENDING rows quiet for UNKNOWN_EXECUTOR_GRACE_MS: dead. The death's timeline
 * starts at the later of the last tick that saw one of its sessions (remembered for this invocation) and its
 * last checkpoint: the last signs of life the plane actually has.
 */
async function judgeSessions(p: Pass, noKit: string[], actionable: KitsJudged['actionable']): Promise<void> {
  const { deps } = p;
  const withSessions = await executorsWithSessions(deps.db, noKit);
  const seenAt = (p.state.sessionsSeenAt ??= new Map());
  for (const id of withSessions) {
    p.alive.add(id);
    seenAt.set(id, deps.clock());
  }
  await p.seen.present([...withSessions], 'sessions');
  const absences = await p.seen.absent(
    noKit.filter((id) => !withSessions.has(id)),
    'sessions',
    p.continuityMs,
  );
  p.result.absent += absences.length;
  const now = deps.clock();
  const quietCutoff = now - deps.config.reaper.unknownExecutorGraceMs;
  const judged = absences.filter((a) => a.absentTicks >= 2 && actionable(a));
  const last = await lastActivityByExecutor(
    deps.db,
    p.app,
    judged.map((a) => a.executorId),
  );
  for (const a of judged) {
    const at = last.get(a.executorId);
    if (at === undefined || at >= quietCutoff) continue;
    const session = seenAt.get(a.executorId);
    seenAt.delete(a.executorId);
    const signOfLife: SignOfLife =
      session !== undefined && session > at
        ? { at: new Date(session).toISOString(), source: 'session' }
        : { at: new Date(Math.min(at, now)).toISOString(), source: 'checkpoint' };
    p.dead.push({ executorId: a.executorId, evidence: 'sessions', absence: a, cutoffMs: quietCutoff, signOfLife });
  }
}

function redeclarable(a: Absence): boolean {
  return a.declaredAgoMs === undefined || a.declaredAgoMs >= REDECLARE_AFTER_MS;
}
