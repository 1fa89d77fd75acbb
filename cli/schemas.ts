import { z } from 'zod';
import { PASS_NAMES } from '../shared/reaper/types.js';

/**
 * The `--json` output of every command: one JSON document on stdout, validated by these schemas in the
 * tests, so scripts can rely on the shape. Errors (any command) print `ErrorOutput` and exit non-zero.
 * Strict at every level: a key a command adds without adding it here fails its test instead of slipping
 * into the contract unreviewed.
 */
const iso = z.iso.datetime({ offset: true });

export const ExecutorStatus = z.strictObject({
  executorId: z.string().nullable(),
  /** From the heartbeat when there is one, else the registry; `lapsed` = registry says alive, no heartbeat; `unknown` = only seen in DBOS's rows. */
  state: z.enum(['alive', 'draining', 'drained', 'dead', 'lapsed', 'unknown']),
  /** The kit's liveness lock in Postgres (pg_locks): `held` while its session lives; null for rows with no executor. */
  livenessLock: z.enum(['held', 'free']).nullable(),
  applicationVersions: z.array(z.string()),
  heartbeatAgeMs: z.number().int().nonnegative().nullable(),
  heartbeatTtlMs: z.number().int().nonnegative().nullable(),
  inFlight: z.number().int().nonnegative().nullable(),
  pending: z.number().int().nonnegative(),
  stuck: z.number().int().nonnegative(),
  oldestActivityAt: iso.nullable(),
  oldestActivityAgeMs: z.number().int().nullable(),
  lastStateChangeAt: iso.nullable(),
  reason: z.string().nullable(),
});

/** RETENTION_MAX_COMPLETED, RETENTION_MAX_AGE_MS, WORKFLOW_GLOBAL_TIMEOUT_MS; null = off. */
export const RetentionPolicyOutput = z.strictObject({
  maxCompleted: z.number().int().positive().nullable(),
  maxAgeMs: z.number().int().positive().nullable(),
  globalTimeoutMs: z.number().int().positive().nullable(),
});

/**
 * One death's timeline (shared/timeline/view.ts; docs/operations.md, "Recovery timelines"): the stages as
 * ISO strings and the gaps from the death (the last sign of life, else the declaration) in ms.
 */
export const TimelineFields = z.strictObject({
  timelineId: z.number().int().positive(),
  executorId: z.string(),
  incarnation: z.string().nullable(),
  cause: z.enum(['crash', 'lost-host', 'sigterm', 'drain', 'manual', 'vanished']),
  recoveryIds: z.strictObject({ first: z.number().int().positive(), last: z.number().int().positive() }),
  lastSignOfLifeAt: iso.nullable(),
  /** What the start is (null: a timeline recorded before the plane said). */
  lastSignOfLifeSource: z.enum(['notice', 'heartbeat', 'session', 'checkpoint', 'declaration']).nullable(),
  declaredAt: iso,
  noticeAt: iso.nullable(),
  firstReenqueuedAt: iso.nullable(),
  lastReenqueuedAt: iso.nullable(),
  firstStepElsewhereAt: iso.nullable(),
  allStartedAt: iso.nullable(),
  counts: z.strictObject({
    recoveries: z.number().int().nonnegative(),
    reenqueued: z.number().int().nonnegative(),
    /** Moved workflows whose start was looked up (the first 1,000 in batch order). */
    tracked: z.number().int().nonnegative(),
    started: z.number().int().nonnegative(),
  }),
  deathToDeclaredMs: z.number().int().nonnegative(),
  deathToReenqueuedMs: z.number().int().nonnegative().nullable(),
  deathToFirstStepMs: z.number().int().nonnegative().nullable(),
  deathToAllStartedMs: z.number().int().nonnegative().nullable(),
  /** open: moved work not all started yet (figures as of now). */
  state: z.enum(['open', 'closed']),
  closedAt: iso.nullable(),
  closedBecause: z.enum(['all-started', 'nothing-moved', 'bound']).nullable(),
});

/** `afterlife-plane timeline <executorId | recovery number>`. */
export const TimelineOutput = z.strictObject({
  command: z.literal('timeline'),
  applicationName: z.string(),
  timeline: TimelineFields,
});
export type TimelineOutput = z.infer<typeof TimelineOutput>;

/** Deaths over a window and how long their work waited: death → first step elsewhere. */
export const RecoveryTimesOutput = z.strictObject({
  since: iso,
  deaths: z.number().int().nonnegative(),
  /** Timelines still open (moved work not all started yet). */
  open: z.number().int().nonnegative(),
  /** Deaths with a first step elsewhere: the ones the percentiles are over. */
  measured: z.number().int().nonnegative(),
  deathToFirstStepMs: z.strictObject({
    p50: z.number().int().nullable(),
    p95: z.number().int().nullable(),
    max: z.number().int().nullable(),
  }),
  slowest: z
    .strictObject({
      executorId: z.string(),
      cause: z.string(),
      declaredAt: iso,
      recoveryId: z.number().int().positive(),
      deathToFirstStepMs: z.number().int(),
    })
    .nullable(),
});

export const StatusOutput = z.strictObject({
  command: z.literal('status'),
  applicationName: z.string(),
  generatedAt: iso,
  redis: z.enum(['ok', 'unavailable', 'not-configured']),
  stuckAfterMs: z.number().int().positive(),
  executors: z.array(ExecutorStatus),
  totals: z.strictObject({
    executors: z.number().int().nonnegative(),
    alive: z.number().int().nonnegative(),
    pending: z.number().int().nonnegative(),
    enqueued: z.number().int().nonnegative(),
    stuck: z.number().int().nonnegative(),
    diverged: z.number().int().nonnegative(),
    byStatus: z.record(z.string(), z.number().int().nonnegative()),
  }),
  /**
   * ENQUEUED work pinned to a version no live executor runs: nothing claims it until an executor of that
   * version starts, or the reaper's orphaned-version pass applies the policy once the oldest row has been
   * untouched for the grace. `known: false` when live versions cannot be read (no Redis).
   */
  stranded: z.strictObject({
    known: z.boolean(),
    policy: z.enum(['leave', 'fork-to-latest']),
    graceMs: z.number().int().nonnegative(),
    versions: z.array(
      z.strictObject({
        applicationVersion: z.string(),
        count: z.number().int().positive(),
        oldestAgeMs: z.number().int().nonnegative(),
        /** Until the reaper's orphaned-version pass may act on the oldest row (0: due now; it runs at most every minute). */
        policyActsInMs: z.number().int().nonnegative(),
      }),
    ),
  }),
  /** Deaths since `--since` (24 h by default) and death → first step elsewhere (their timelines). */
  recoveryTimes: RecoveryTimesOutput,
  recentRecoveries: z.array(
    z.strictObject({
      id: z.number().int(),
      executorId: z.string(),
      reason: z.string(),
      detectedBy: z.string(),
      lockMode: z.enum(['locked', 'degraded']),
      outcome: z.enum(['completed', 'partial', 'failed']).nullable(),
      reenqueued: z.number().int().nonnegative(),
      startedAt: iso,
      durationMs: z.number().int().nonnegative().nullable(),
    }),
  ),
  /** The retention policy in force (off unless configured) and what the last pass did. */
  retention: z.strictObject({
    policy: RetentionPolicyOutput,
    summary: z.string(),
    lastPassAt: iso.nullable(),
    lastPass: z
      .strictObject({
        deleted: z.number().int().nonnegative(),
        timedOut: z.number().int().nonnegative(),
        batches: z.number().int().nonnegative(),
        longestBatchMs: z.number().nonnegative(),
        stoppedBecause: z.string(),
        roundFinished: z.boolean(),
      })
      .nullable(),
    roundInProgress: z.boolean(),
    totalDeleted: z.number().int().nonnegative(),
    totalTimedOut: z.number().int().nonnegative(),
  }),
  /**
   * Applications with live kits in this database that no plane guards (no reaper tick lately), this one
   * included when nothing ticks for it either: their deaths are not recovered. Absent in output of older
   * planes.
   */
  unguarded: z
    .array(z.strictObject({ applicationName: z.string(), kits: z.number().int().positive(), executorIds: z.array(z.string()) }))
    .optional(),
  /**
   * When this application has no executors: the other applications in this database that have some (the
   * most first, at most five), so an empty table says where to look (`--app`).
   */
  elsewhere: z.array(z.strictObject({ applicationName: z.string(), executors: z.number().int().positive() })).optional(),
});
export type StatusOutput = z.infer<typeof StatusOutput>;

/** `afterlife-plane retention [--dry-run]`: one pass with the configured policy. */
export const RetentionOutput = z.strictObject({
  command: z.literal('retention'),
  applicationName: z.string(),
  dryRun: z.boolean(),
  policy: RetentionPolicyOutput,
  summary: z.string(),
  deleted: z.number().int().nonnegative(),
  steps: z.number().int().nonnegative(),
  inputs: z.number().int().nonnegative(),
  outputs: z.number().int().nonnegative(),
  batches: z.number().int().nonnegative(),
  longestBatchMs: z.number().nonnegative(),
  timedOut: z.number().int().nonnegative(),
  timedOutWorkflows: z.array(z.string()),
  /** --dry-run: the workflows that would go (the first 1,000). */
  wouldDelete: z.array(z.string()),
  cutoffAt: iso.nullable(),
  roundFinished: z.boolean(),
  stoppedBecause: z.enum(['off', 'done', 'slice', 'budget']),
  own: z
    .strictObject({
      executors: z.number().int(),
      observations: z.number().int(),
      recoveries: z.number().int(),
      drainRequests: z.number().int(),
      timelines: z.number().int(),
      stuck: z.number().int(),
      lineages: z.number().int(),
    })
    .nullable(),
  durationMs: z.number().int().nonnegative(),
});
export type RetentionOutput = z.infer<typeof RetentionOutput>;

export const RecoverOutput = z.strictObject({
  command: z.literal('recover'),
  applicationName: z.string(),
  executorId: z.string(),
  dryRun: z.boolean(),
  /** PENDING rows the executor owns, per application version (`(none)` for NULL), before any change. */
  pendingByVersion: z.record(z.string(), z.number().int().nonnegative()),
  outcome: z.enum(['dry-run', 'completed', 'nothing-to-do', 'false-alarm']),
  reenqueued: z.number().int().nonnegative(),
  recoveryId: z.number().int().nullable(),
  lockMode: z.enum(['locked', 'degraded']).nullable(),
  durationMs: z.number().int().nonnegative().nullable(),
  versionsWithoutExecutor: z.array(z.string()),
  /** A dry run: why the real run would be refused without --force (the executor looks alive); null if it would go ahead. */
  wouldRefuse: z.string().nullable().optional(),
});
export type RecoverOutput = z.infer<typeof RecoverOutput>;

export const MigrateOutput = z.strictObject({
  command: z.literal('migrate'),
  dbosSchema: z.string(),
  afterlifeSchema: z.string(),
  dbosMigration: z.number().int(),
  applied: z.array(z.string()),
  current: z.array(z.string()),
  /** Opt-in indexes built or confirmed with --indexes; empty without it. */
  indexes: z.array(z.string()),
});
export type MigrateOutput = z.infer<typeof MigrateOutput>;

export const ErrorOutput = z.strictObject({
  error: z.strictObject({ code: z.string(), message: z.string(), issues: z.array(z.string()).optional() }),
});
export type ErrorOutput = z.infer<typeof ErrorOutput>;

export const DrainOutput = z.strictObject({
  command: z.literal('drain'),
  applicationName: z.string(),
  applicationVersion: z.string(),
  requestIds: z.array(z.number().int()),
  budgetMs: z.number().int().positive(),
  waited: z.boolean(),
  timedOut: z.boolean(),
  waitedMs: z.number().int().nonnegative(),
  /** Every executor of the version drained or dead and none of its workflows PENDING. */
  done: z.boolean(),
  pending: z.number().int().nonnegative(),
  /** ENQUEUED workflows pinned to the version: no other version will claim them (not part of `done`). */
  enqueued: z.number().int().nonnegative(),
  heartbeatsKnown: z.boolean(),
  executors: z.array(
    z.strictObject({
      executorId: z.string(),
      applicationVersion: z.string().nullable(),
      state: z.enum(['alive', 'draining', 'drained', 'dead', 'unknown']),
      heartbeatAgeMs: z.number().int().nonnegative().nullable(),
      inFlight: z.number().int().nonnegative().nullable(),
      pending: z.number().int().nonnegative(),
    }),
  ),
});
export type DrainOutput = z.infer<typeof DrainOutput>;

export const ForkOutput = z.strictObject({
  command: z.literal('fork'),
  applicationName: z.string(),
  workflowId: z.string(),
  outcome: z.enum(['forked', 'already-forked', 'dead-lettered', 'busy', 'skipped']),
  newWorkflowId: z.string().nullable(),
  root: z.string().nullable(),
  /** This fork's number in the lineage (1 = first). */
  n: z.number().int().positive().nullable(),
  startStep: z.number().int().nonnegative().nullable(),
  reason: z.enum(['diverged', 'child-diverged', 'orphaned-version', 'stuck']).nullable(),
  /** dead-lettered: how many forks the lineage used. */
  forks: z.number().int().nonnegative().nullable(),
  deadLetterPublished: z.boolean().nullable(),
  skippedBecause: z.enum(['missing', 'not-diverged', 'not-forkable']).nullable(),
  status: z.string().nullable(),
});
export type ForkOutput = z.infer<typeof ForkOutput>;

export const ReapOutput = z.strictObject({
  command: z.literal('reap'),
  applicationName: z.string(),
  dryRun: z.boolean(),
  /** skipped: another reaper (the deployed one) holds the single-flight lease. */
  outcome: z.enum(['completed', 'skipped']),
  reason: z.string().nullable(),
  ticks: z.number().int().nonnegative(),
  durationMs: z.number().int().nonnegative(),
  declaredDead: z.array(z.string()),
  stuckWorkflows: z.array(z.string()),
  /** --dry-run: what it would have done. */
  planned: z.array(
    z.strictObject({
      pass: z.enum(PASS_NAMES).exclude(['timelines']),
      action: z.enum(['declare-dead', 'recover-inline', 'report', 'cancel', 'fork', 'delete']),
      executorId: z.string().nullable(),
      workflowId: z.string().nullable(),
    }),
  ),
  errors: z.array(z.strictObject({ tick: z.number().int(), pass: z.enum(PASS_NAMES), error: z.string() })),
  heartbeatSkipped: z.array(z.string()),
});
export type ReapOutput = z.infer<typeof ReapOutput>;

/** `afterlife-plane doctor`: every check of the chain (shared/doctor), in order; exit 1 on any FAIL. */
export const DoctorOutput = z.strictObject({
  command: z.literal('doctor'),
  applicationName: z.string(),
  generatedAt: iso,
  checks: z.array(
    z.strictObject({
      id: z.string(),
      title: z.string(),
      status: z.enum(['PASS', 'WARN', 'FAIL']),
      summary: z.string(),
      details: z.array(z.string()),
      fix: z.string().optional(),
      doc: z.string(),
    }),
  ),
  counts: z.strictObject({
    pass: z.number().int().nonnegative(),
    warn: z.number().int().nonnegative(),
    fail: z.number().int().nonnegative(),
  }),
});
export type DoctorOutput = z.infer<typeof DoctorOutput>;
