import {
  heartbeatKey,
  type HeartbeatValue,
  listExecutors,
  readAllHeartbeats,
  readHeartbeat,
  readLiveness,
} from '../../packages/executor/src/plane/index.js';
import { recentRecoveries } from '../../shared/db/queries/recentRecoveries.js';
import { readRetentionState } from '../../shared/db/queries/retentionState.js';
import { describePolicy, policyOf } from '../../shared/retention/policy.js';
import { checkDbosSchema } from '../../shared/dbos/schema.js';
import { findDiverged } from '../../shared/dbos/diverged.js';
import { countStrandedEnqueued } from '../../shared/dbos/orphaned.js';
import { countByStatus, pendingSummaryByExecutor } from '../../shared/dbos/status.js';
import { shownState } from '../../shared/drain/index.js';
import { findUnguarded } from '../../shared/reaper/unguarded.js';
import { applicationsWithExecutors } from '../../shared/db/queries/otherApplications.js';
import type { CliContext } from '../context.js';
import { duration } from '../format.js';
import type { StatusOutput } from '../schemas.js';
import { recoveryTimes } from './recoveryTimes.js';
import { DEFAULT_SINCE_MS } from './since.js';
import { DIVERGED_LIMIT, render } from './statusText.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife-plane status`: every executor afterlife knows of (heartbeats, the registry, and owners of PENDING
 * rows), with state, version, heartbeat age, PENDING count and oldest activity; stuck and diverged counts;
 * the latest recoveries. Read-only.
 */
type Executor = StatusOutput['executors'][number];
type Beats = Map<string, { value: HeartbeatValue | undefined; ttlMs: number | undefined }>;
type Registry = Awaited<ReturnType<typeof listExecutors>>;
type Pending = Awaited<ReturnType<typeof pendingSummaryByExecutor>>;

export async function status(ctx: CliContext, o: { since?: Date } = {}): Promise<CommandResult<StatusOutput>> {
  const { db, config } = ctx;
  const app = config.applicationName;
  await checkDbosSchema(db);
  const now = Date.now();

  const [registry, pending, byStatus, diverged, recoveries] = [
    await listExecutors(db, app),
    await pendingSummaryByExecutor(db, app, config.reaper.stuckAfterMs),
    await countByStatus(db, app),
    // The reaper's own selection (not forked, not dead-lettered, top-level), so the two never disagree.
    await findDiverged(db, app, DIVERGED_LIMIT),
    await recentRecoveries(db, app, 10),
  ];
  const retention = await readRetentionState(db, app);
  const { redisState, beats } = await heartbeats(ctx);
  const executors = await executorRows(ctx, { registry, pending, beats, redisState }, now);

  const out: StatusOutput = {
    command: 'status',
    applicationName: app,
    generatedAt: new Date(now).toISOString(),
    redis: redisState,
    stuckAfterMs: config.reaper.stuckAfterMs,
    executors,
    totals: {
      executors: executors.length,
      alive: executors.filter((e) => e.state === 'alive').length,
      pending: byStatus.PENDING ?? 0,
      enqueued: byStatus.ENQUEUED ?? 0,
      stuck: pending.reduce((n, p) => n + p.stuck, 0),
      diverged: diverged.length,
      byStatus,
    },
    stranded: await strandedOf(ctx, registry, beats, redisState),
    recoveryTimes: await recoveryTimes(ctx, o.since ?? new Date(now - DEFAULT_SINCE_MS)),
    recentRecoveries: recoveries.map((r) => ({ ...r, startedAt: r.startedAt.toISOString() })),
    retention: retentionOf(ctx, retention),
    // This application too: a status read where no plane ticks is the case doctor FAILs, and it says so here.
    unguarded: await findUnguarded(db, undefined),
    ...(executors.length === 0 ? { elsewhere: await applicationsWithExecutors(db, app, 5) } : {}),
  };
  return { json: out, text: render(out), exitCode: 0 };
}

/** Every heartbeat of the app with its TTL; Redis `unavailable` when it does not answer. */
async function heartbeats(ctx: CliContext): Promise<{ redisState: StatusOutput['redis']; beats: Beats }> {
  const { config } = ctx;
  const app = config.applicationName;
  let redisState: StatusOutput['redis'] = config.redis ? 'ok' : 'not-configured';
  const beats: Beats = new Map();
  if (ctx.redis) {
    try {
      if (!ctx.redisReady) throw new Error('not connected');
      const all = await readAllHeartbeats(ctx.redis, app, config.redis?.keyPrefix);
      for (const id of all.keys()) {
        const reading = await readHeartbeat(ctx.redis, heartbeatKey(app, id, config.redis?.keyPrefix));
        if (reading) beats.set(id, reading);
      }
    } catch {
      redisState = 'unavailable';
    }
  }
  return { redisState, beats };
}

/** One row per executor known from the registry, a heartbeat or PENDING rows, sorted by ID. */
async function executorRows(
  ctx: CliContext,
  known: { registry: Registry; pending: Pending; beats: Beats; redisState: StatusOutput['redis'] },
  now: number,
): Promise<Executor[]> {
  const { registry, pending, beats } = known;
  const ids = new Set<string | null>([...registry.map((r) => r.executor_id), ...beats.keys(), ...pending.map((p) => p.executorId)]);
  const locks = await readLiveness(
    ctx.db,
    ctx.config.applicationName,
    [...ids].filter((id): id is string => id !== null),
  );
  return [...ids]
    .sort((a, b) => (a ?? '').localeCompare(b ?? ''))
    .map((id) =>
      executorRow(id, {
        reg: registry.find((r) => r.executor_id === id),
        beat: id === null ? undefined : beats.get(id),
        p: pending.find((x) => x.executorId === id),
        held: id === null ? null : locks.held.has(id),
        redisState: known.redisState,
        now,
      }),
    );
}

function executorRow(
  id: string | null,
  o: {
    reg: Registry[number] | undefined;
    beat: ReturnType<Beats['get']>;
    p: Pending[number] | undefined;
    held: boolean | null;
    redisState: StatusOutput['redis'];
    now: number;
  },
): Executor {
  const { reg, beat, p, now } = o;
  const versions = new Set<string>(p?.applicationVersions ?? []);
  if (beat?.value) versions.add(beat.value.applicationVersion);
  if (reg?.application_version) versions.add(reg.application_version);
  let state: Executor['state'];
  if (beat) state = beat.value?.state ?? 'alive';
  else if (reg)
    state = reg.state === 'alive' || reg.state === 'draining' ? (o.redisState === 'ok' ? 'lapsed' : reg.state) : shownState(reg);
  else state = 'unknown';
  const beatAt = beat?.value ? Date.parse(beat.value.beatAt) : undefined;
  return {
    executorId: id,
    state,
    livenessLock: o.held === null ? null : o.held ? 'held' : 'free',
    applicationVersions: [...versions].sort(),
    heartbeatAgeMs: beatAt === undefined || Number.isNaN(beatAt) ? null : Math.max(0, now - beatAt),
    heartbeatTtlMs: beat?.ttlMs ?? null,
    inFlight: beat?.value?.inFlight ?? null,
    pending: p?.pending ?? 0,
    stuck: p?.stuck ?? 0,
    oldestActivityAt: p?.oldestActivityMs == null ? null : new Date(p.oldestActivityMs).toISOString(),
    oldestActivityAgeMs: p?.oldestActivityMs == null ? null : now - p.oldestActivityMs,
    lastStateChangeAt: reg ? reg.state_changed_at.toISOString() : null,
    reason: reg?.reason ?? null,
  };
}

/**
 * ENQUEUED work of versions no live executor runs. Live versions as the orphaned-version pass reads them,
 * less executors the registry already calls dead (a SIGKILLed kit's last beat stays readable until its TTL).
 */
async function strandedOf(
  ctx: CliContext,
  registry: Registry,
  beats: Beats,
  redisState: StatusOutput['redis'],
): Promise<StatusOutput['stranded']> {
  const { config } = ctx;
  const deadIds = new Set(registry.filter((r) => r.state === 'dead').map((r) => r.executor_id));
  const liveVersions = [...beats].flatMap(([id, b]) =>
    b.value?.state === 'alive' && !deadIds.has(id) ? [b.value.applicationVersion] : [],
  );
  const graceMs = config.reaper.orphanedVersionGraceMs;
  return {
    known: redisState === 'ok',
    policy: config.recovery.orphanedVersionPolicy,
    graceMs,
    versions:
      redisState === 'ok'
        ? (await countStrandedEnqueued(ctx.db, config.applicationName, liveVersions)).map((v) => ({
            ...v,
            policyActsInMs: Math.max(0, graceMs - v.oldestAgeMs),
          }))
        : [],
  };
}

function retentionOf(ctx: CliContext, retention: Awaited<ReturnType<typeof readRetentionState>>): StatusOutput['retention'] {
  const policy = policyOf(ctx.config);
  return {
    policy: {
      maxCompleted: policy.maxCompleted ?? null,
      maxAgeMs: policy.maxAgeMs ?? null,
      globalTimeoutMs: policy.globalTimeoutMs ?? null,
    },
    summary: describePolicy(policy, duration),
    lastPassAt: retention.lastPassAt?.toISOString() ?? null,
    lastPass: lastPassOf(retention.lastPass),
    roundInProgress: retention.round !== undefined,
    totalDeleted: retention.totalDeleted,
    totalTimedOut: retention.totalTimedOut,
  };
}

/** The recorded summary (jsonb, written by shared/retention/pass.ts), reduced to what status shows. */
function lastPassOf(p: Record<string, unknown> | undefined): StatusOutput['retention']['lastPass'] {
  if (!p) return null;
  const n = (k: string) => (typeof p[k] === 'number' ? p[k] : 0);
  return {
    deleted: n('deleted'),
    timedOut: n('timedOut'),
    batches: n('batches'),
    longestBatchMs: n('longestBatchMs'),
    stoppedBecause: typeof p.stoppedBecause === 'string' ? p.stoppedBecause : 'unknown',
    roundFinished: p.roundFinished === true,
  };
}
