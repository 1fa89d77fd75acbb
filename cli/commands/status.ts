import { listExecutors } from '../../shared/db/queries/executors.js';
import { recentRecoveries } from '../../shared/db/queries/recentRecoveries.js';
import { readRetentionState } from '../../shared/db/queries/retentionState.js';
import { describePolicy, policyOf } from '../../shared/retention/policy.js';
import { checkDbosSchema } from '../../shared/dbos/schema.js';
import { findDiverged } from '../../shared/dbos/diverged.js';
import { countStrandedEnqueued } from '../../shared/dbos/orphaned.js';
import { readLiveness } from '../../shared/liveness/held.js';
import { countByStatus, pendingSummaryByExecutor } from '../../shared/dbos/status.js';
import { heartbeatKey, readAllHeartbeats, readHeartbeat, type HeartbeatValue } from '../../shared/heartbeat/index.js';
import type { CliContext } from '../context.js';
import { ago, duration, table } from '../format.js';
import { StatusOutput } from '../schemas.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife status`: every executor afterlife knows of (heartbeats, the registry, and owners of PENDING
 * rows), with state, version, heartbeat age, PENDING count and oldest activity; stuck and diverged counts;
 * the latest recoveries. Read-only.
 */
type Executor = StatusOutput['executors'][number];

/** Counting diverged workflows stops here (shown as "1000+"): the reaper works through them in batches. */
const DIVERGED_LIMIT = 1_000;

export async function status(ctx: CliContext): Promise<CommandResult<StatusOutput>> {
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
  const policy = policyOf(config);

  let redisState: StatusOutput['redis'] = config.redis ? 'ok' : 'not-configured';
  const beats = new Map<string, { value: HeartbeatValue | undefined; ttlMs: number | undefined }>();
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

  const ids = new Set<string | null>([...registry.map((r) => r.executor_id), ...beats.keys(), ...pending.map((p) => p.executorId)]);
  const locks = await readLiveness(db, app, [...ids].filter((id): id is string => id !== null));
  const executors: Executor[] = [...ids]
    .sort((a, b) => (a ?? '').localeCompare(b ?? ''))
    .map((id) => {
      const reg = registry.find((r) => r.executor_id === id);
      const beat = id === null ? undefined : beats.get(id);
      const p = pending.find((x) => x.executorId === id);
      const versions = new Set<string>(p?.applicationVersions ?? []);
      if (beat?.value) versions.add(beat.value.applicationVersion);
      if (reg?.application_version) versions.add(reg.application_version);
      let state: Executor['state'];
      if (beat) state = beat.value?.state ?? 'alive';
      else if (reg) state = reg.state === 'alive' || reg.state === 'draining' ? (redisState === 'ok' ? 'lapsed' : reg.state) : reg.state;
      else state = 'unknown';
      const beatAt = beat?.value ? Date.parse(beat.value.beatAt) : undefined;
      return {
        executorId: id,
        state,
        livenessLock: id === null ? null : locks.held.has(id) ? 'held' : 'free',
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
    });

  // Live versions as the orphaned-version pass reads them, less executors the registry already calls dead
  // (a SIGKILLed kit's last beat stays readable until its TTL).
  const deadIds = new Set(registry.filter((r) => r.state === 'dead').map((r) => r.executor_id));
  const liveVersions = [...beats].flatMap(([id, b]) => (b.value?.state === 'alive' && !deadIds.has(id) ? [b.value.applicationVersion] : []));
  const graceMs = config.reaper.orphanedVersionGraceMs;
  const stranded: StatusOutput['stranded'] = {
    known: redisState === 'ok',
    policy: config.recovery.orphanedVersionPolicy,
    graceMs,
    versions:
      redisState === 'ok'
        ? (await countStrandedEnqueued(db, app, liveVersions)).map((v) => ({ ...v, policyActsInMs: Math.max(0, graceMs - v.oldestAgeMs) }))
        : [],
  };

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
    stranded,
    recentRecoveries: recoveries.map((r) => ({ ...r, startedAt: r.startedAt.toISOString() })),
    retention: {
      policy: { maxCompleted: policy.maxCompleted ?? null, maxAgeMs: policy.maxAgeMs ?? null, globalTimeoutMs: policy.globalTimeoutMs ?? null },
      summary: describePolicy(policy, duration),
      lastPassAt: retention.lastPassAt?.toISOString() ?? null,
      lastPass: lastPassOf(retention.lastPass),
      roundInProgress: retention.round !== undefined,
      totalDeleted: retention.totalDeleted,
      totalTimedOut: retention.totalTimedOut,
    },
  };
  return { json: out, text: render(out), exitCode: 0 };
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

function render(s: StatusOutput): string {
  const lines = [`afterlife status — application ${s.applicationName} — ${s.generatedAt} — redis ${s.redis}`, ''];
  if (s.executors.length === 0) lines.push('no executors known (no heartbeats, no registry rows, no PENDING workflows)');
  else
    lines.push(
      table(
        ['EXECUTOR', 'STATE', 'LOCK', 'VERSION', 'HEARTBEAT', 'IN-FLIGHT', 'PENDING', 'STUCK', 'OLDEST ACTIVITY'],
        s.executors.map((e) => [
          e.executorId ?? '(none)',
          e.state,
          e.livenessLock ?? '-',
          e.applicationVersions.join(',') || '-',
          ago(e.heartbeatAgeMs),
          e.inFlight === null ? '-' : String(e.inFlight),
          String(e.pending),
          String(e.stuck),
          ago(e.oldestActivityAgeMs),
        ]),
      ),
    );
  const byStatus = Object.entries(s.totals.byStatus)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ');
  lines.push(
    '',
    `workflows: ${byStatus || 'none'}`,
    `stuck: ${s.totals.stuck} (PENDING with no activity for ${duration(s.stuckAfterMs)})   diverged: ${s.totals.diverged >= DIVERGED_LIMIT ? `${DIVERGED_LIMIT}+` : s.totals.diverged} (ERROR with DBOSUnexpectedStepError, not forked or dead-lettered yet)`,
  );
  if (!s.stranded.known) lines.push('stranded: unknown (live versions come from heartbeats; Redis is not available)');
  else if (s.stranded.versions.length === 0) lines.push('stranded: none (every ENQUEUED version has a live executor)');
  else {
    const then = s.stranded.policy === 'fork-to-latest' ? 'forks them to the latest live version' : 'reports them and leaves them ENQUEUED';
    lines.push('', `STRANDED: ENQUEUED work of versions no live executor runs — nothing claims it until an executor of that version starts`);
    lines.push(
      table(
        ['VERSION', 'ENQUEUED', 'OLDEST', 'POLICY', 'ACTS'],
        s.stranded.versions.map((v) => [v.applicationVersion, String(v.count), ago(v.oldestAgeMs), s.stranded.policy, v.policyActsInMs === 0 ? 'due now' : `in ${duration(v.policyActsInMs)}`]),
      ),
    );
    lines.push(`ORPHANED_VERSION_POLICY=${s.stranded.policy}: after ORPHANED_VERSION_GRACE_MS (${duration(s.stranded.graceMs)}) untouched the reaper ${then}`);
  }
  const r = s.retention;
  lines.push('', r.summary);
  if (r.lastPass && r.lastPassAt) {
    lines.push(
      `last retention pass ${ago(Date.parse(s.generatedAt) - Date.parse(r.lastPassAt))}: deleted ${r.lastPass.deleted}, timed out ${r.lastPass.timedOut}, ` +
        `${r.lastPass.batches} batch(es), longest ${duration(r.lastPass.longestBatchMs)}, ${r.lastPass.roundFinished ? 'round finished' : `stopped (${r.lastPass.stoppedBecause}), round in progress`}` +
        ` — since the start: ${r.totalDeleted} deleted, ${r.totalTimedOut} timed out`,
    );
  } else if (r.policy.maxCompleted !== null || r.policy.maxAgeMs !== null || r.policy.globalTimeoutMs !== null) lines.push('no retention pass has run yet');
  if (s.recentRecoveries.length) {
    lines.push('', 'recent recoveries:');
    lines.push(
      table(
        ['ID', 'EXECUTOR', 'REASON', 'BY', 'OUTCOME', 'RE-ENQUEUED', 'TOOK', 'LOCK', 'WHEN'],
        s.recentRecoveries.map((r) => [
          `#${r.id}`,
          r.executorId,
          r.reason,
          r.detectedBy,
          r.outcome ?? 'running',
          String(r.reenqueued),
          r.durationMs === null ? '-' : duration(r.durationMs),
          r.lockMode,
          ago(Date.parse(s.generatedAt) - Date.parse(r.startedAt)),
        ]),
      ),
    );
  }
  return `${lines.join('\n')}\n`;
}
