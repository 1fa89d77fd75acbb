import { z } from 'zod';
import {
  ConfigError,
  parseSetting,
  type PoolTarget,
  redisTlsProblem,
  type SettingName,
  settingRelationProblems,
  SETTINGS,
  type SettingValue,
} from '../../packages/executor/src/plane/index.js';
import { ALLOW_BELOW_FLOOR, FLOORS, floorProblems, MAX_AGE_MS, MAX_TIMER_MS, relationProblems } from './bounds.js';

/**
 * One `loadConfig(env)` for every function, the CLI and the local stack. Env is a parameter so tests
 * never touch process.env. Every problem is reported at once; secrets never appear in errors or logs.
 */

/**
 * A setting the kit reads too: parsed by the contract's one parser (packages/executor/src/contract/settings.ts),
 * so both sides accept the same values and refuse the others with the same message.
 */
function shared<K extends SettingName>(name: K) {
  return z.string().transform((raw, ctx): SettingValue<K> => {
    const r = parseSetting(name, raw);
    if (r.ok) return r.value;
    ctx.addIssue({ code: 'custom', message: r.problem });
    return z.NEVER;
  });
}

/**
 * Plain decimal only: `z.coerce.number` would also read `0x10`, `1e3`, ` 16` and `16.0`, so a typo or a
 * templating accident becomes a different number instead of an error.
 */
const int = (def: number, min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .regex(/^(0|[1-9][0-9]{0,15})$/, 'must be a plain decimal integer')
    .transform(Number)
    .pipe(
      z
        .number()
        .int()
        .min(min, `must be at least ${min}`)
        .max(max, max === MAX_TIMER_MS ? `must be at most ${max} (2^31−1 ms, the longest timer Node arms)` : `must be at most ${max}`),
    )
    .prefault(String(def));

/** A duration in ms: at most MAX_TIMER_MS unless a lower ceiling is given (bounds.ts says why). */
const ms = (def: number, min: number, max: number = MAX_TIMER_MS) => int(def, min, Math.min(max, MAX_TIMER_MS));
const applicationName = z
  .string()
  .min(1)
  .max(512)
  .refine(
    (v) => !/[:\u0000-\u001f\u007f*?[\]\\]/.test(v),
    'must not contain ":", glob characters (* ? [ ] \\) or control characters: it is part of Redis keys and patterns',
  );

const postgresUrl = z
  .string()
  .refine((v) => /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// or postgresql:// URL')
  .refine((v) => URL.canParse(v), 'is not a valid URL');

const EnvSchema = z.object({
  DATABASE_URL: postgresUrl.optional(),
  INSTANCE_CONNECTION_NAME: z
    .string()
    .regex(/^[^:]+:[^:]+:[^:]+$/, 'must be project:region:instance')
    .optional(),
  DB_USER: z.string().min(1).optional(),
  DB_NAME: z.string().min(1).optional(),
  DB_PASSWORD: z.string().min(1).optional(),
  DB_IP_TYPE: z.enum(['PUBLIC', 'PRIVATE', 'PSC']).default('PRIVATE'),
  DB_POOL_MAX: int(3, 1, 100),
  // A connection not made in 10 min is not coming; longer only hides that (and past 2^31−1 the timer fires at once).
  DB_CONNECT_TIMEOUT_MS: ms(5_000, 100, 600_000),
  DB_STATEMENT_TIMEOUT_MS: ms(30_000, 100),

  DBOS_APPLICATION_NAME: applicationName,
  DBOS_SYSTEM_SCHEMA: shared('DBOS_SYSTEM_SCHEMA').default('dbos'),
  AFTERLIFE_SCHEMA: shared('AFTERLIFE_SCHEMA').default('afterlife'),

  REDIS_URL: shared('REDIS_URL').optional(),
  REDIS_KEY_PREFIX: shared('REDIS_KEY_PREFIX').default('afterlife'),
  REDIS_CA_CERT: shared('REDIS_CA_CERT').optional(),

  GOOGLE_CLOUD_PROJECT: shared('GOOGLE_CLOUD_PROJECT').optional(),
  EXECUTOR_DEATH_TOPIC: shared('EXECUTOR_DEATH_TOPIC').default('executor-deaths'),
  DEAD_LETTER_TOPIC: z.string().min(1).default('workflow-dead-letters'),

  HEARTBEAT_TTL_MS: shared('HEARTBEAT_TTL_MS').prefault(String(SETTINGS.HEARTBEAT_TTL_MS.default)),
  // A beat is "stale" after two intervals: with the liveness lock free, that is the second witness of death.
  HEARTBEAT_INTERVAL_MS: shared('HEARTBEAT_INTERVAL_MS').prefault(String(SETTINGS.HEARTBEAT_INTERVAL_MS.default)),
  FUNCTION_TIMEOUT_S: int(60, 1, 3_600),
  BUDGET_MARGIN_MS: ms(5_000, 0),
  DRAIN_BUDGET_MS: ms(600_000, 1_000, 86_400_000),

  RECOVERY_BATCH_SIZE: int(1_000, 1, 100_000),
  // Extended every third of itself; a dead recoverer's lock blocks the next one this long, so at most 10 min.
  LOCK_TTL_MS: ms(30_000, 1_000, 600_000),
  ORPHANED_VERSION_POLICY: z.enum(['leave', 'fork-to-latest']).default('leave'),

  // Four dead-executor checks a second; the other passes run at most once a second (shared/reaper/tick.ts).
  REAPER_TICK_MS: ms(250, 50),
  STUCK_AFTER_MS: ms(3_600_000, 1_000),
  STUCK_POLICY: z.enum(['report', 'cancel-and-fork', 'cancel-and-repair']).default('report'),
  UNKNOWN_EXECUTOR_GRACE_MS: ms(600_000, 0),
  ORPHANED_VERSION_GRACE_MS: ms(300_000, 0),
  // A few ticks: a holder that died is replaced within this (plus a standby's poll).
  REAPER_LEASE_MS: ms(3_000, 500),
  // `inline`: the reaper recovers what it declares dead itself (a death notice only for what its tick
  // budget leaves); `notice`: it publishes a death notice and executorDeath recovers.
  REAPER_RECOVERY: z.enum(['inline', 'notice']).default('inline'),
  // `none` when the kits' liveness connections go through a pooler in transaction mode (no session locks).
  REAPER_LIVENESS_EVIDENCE: z.enum(['pg_locks', 'none']).default('pg_locks'),
  // After a Postgres start every liveness lock is free at once; until this has passed, the heartbeat decides alone.
  REAPER_LIVENESS_SETTLE_MS: ms(10_000, 0),
  // `none` when DBOS reaches Postgres through a pooler (PgBouncer) that hides its application_name.
  REAPER_SESSION_EVIDENCE: z.enum(['pg_stat_activity', 'none']).default('pg_stat_activity'),
  REAPER_DIVERGED_LOOKBACK_MS: ms(3_600_000, 60_000),

  // Repairs (rewinds and forks together) per lineage before a dead letter; MAX_FORKS is its deprecated name.
  MAX_REPAIRS: int(3, 1, 100),
  FORK_TARGET_VERSION: z.enum(['latest', 'original']).default('latest'),
  // Repair (shared/repair): rewind in place under the workflow's own ID, or fork to <root>-fork-<n>.
  REPAIR_MODE: z.enum(['rewind', 'fork']).default('rewind'),
  // Schemas, in the database afterlife connects to, holding DBOS data-source checkpoints (transaction_completion).
  DATASOURCE_SCHEMAS: z
    .string()
    .default('dbos')
    .refine((v) => v.split(',').every((x) => /^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(x.trim())), 'must be comma-separated SQL identifiers'),
  // The newest DBOS system-schema migration afterlife may run against (tested: 123); raise only after checking.
  DBOS_SCHEMA_MAX_VERSION: int(123, 123, 1_000_000),

  // Retention (shared/retention, docs/retention.md): OFF unless set. 0 = off. Deleting history cannot be undone.
  RETENTION_MAX_COMPLETED: int(0, 0, 1_000_000_000_000),
  // Compared with the clock, not armed as a timer: may exceed MAX_TIMER_MS, but `now − age` must stay a timestamp.
  RETENTION_MAX_AGE_MS: int(0, 0, MAX_AGE_MS),
  WORKFLOW_GLOBAL_TIMEOUT_MS: int(0, 0, MAX_AGE_MS),
  // Thresholds that cancel or delete have floors (bounds.ts); this names those the operator means below theirs.
  [ALLOW_BELOW_FLOOR]: z
    .string()
    .refine(
      (v) => v.split(',').every((x) => FLOORS.some((f) => f.variable === x.trim())),
      `must name variables with a floor, comma-separated: ${FLOORS.map((f) => f.variable).join(', ')}`,
    )
    .optional(),

  LOG_LEVEL: z.enum(['DEBUG', 'INFO', 'NOTICE', 'WARNING', 'ERROR']).default('INFO'),
});

function databaseTargetProblems(env: Record<string, string>): string[] {
  if (env.INSTANCE_CONNECTION_NAME === undefined) {
    return env.DATABASE_URL === undefined ? ['DATABASE_URL: set DATABASE_URL, or INSTANCE_CONNECTION_NAME with DB_USER and DB_NAME'] : [];
  }
  return (['DB_USER', 'DB_NAME'] as const)
    .filter((k) => env[k] === undefined)
    .map((k) => `${k}: is required with INSTANCE_CONNECTION_NAME`);
}

export type Env = z.input<typeof EnvSchema>;
type Parsed = z.output<typeof EnvSchema>;

export interface Config {
  database: PoolTarget;
  applicationName: string;
  dbosSchema: string;
  afterlifeSchema: string;
  redis: { url: string; keyPrefix: string; tlsCa: string | undefined } | undefined;
  project: string | undefined;
  topics: { executorDeaths: string; deadLetters: string };
  heartbeatTtlMs: number;
  /** The kits' beat interval; a beat older than two of them is stale. */
  heartbeatIntervalMs: number;
  functionTimeoutS: number;
  budgetMarginMs: number;
  /** Default budget of a planned drain (the drain function's POST without `budgetMs`). */
  drainBudgetMs: number;
  recovery: { batchSize: number; lockTtlMs: number; orphanedVersionPolicy: 'leave' | 'fork-to-latest' };
  reaper: {
    tickMs: number;
    stuckAfterMs: number;
    stuckPolicy: 'report' | 'cancel-and-fork' | 'cancel-and-repair';
    unknownExecutorGraceMs: number;
    /** ENQUEUED rows of a version no live executor runs are orphaned once untouched this long. */
    orphanedVersionGraceMs: number;
    leaseMs: number;
    /** Who recovers a death the reaper declares: itself (`inline`) or executorDeath through a notice. */
    recovery: 'inline' | 'notice';
    /** Whether a free liveness lock (pg_locks) is evidence; `none` behind a transaction-mode pooler. */
    livenessEvidence: 'pg_locks' | 'none';
    /** For this long after a Postgres start, free liveness locks prove nothing (every session just dropped). */
    livenessSettleMs: number;
    divergedLookbackMs: number;
    /**
     * Where "no session of that executor" is read for executors without the kit. `none` makes it
     * unknown (they are never judged): behind a pooler the executors' sessions carry the pooler's name.
     */
    sessionEvidence: 'pg_stat_activity' | 'none';
  };
  /** Repair (shared/repair): putting a diverged, stuck or orphaned workflow back on a path that can finish. */
  repair: {
    /** How a diverged, stuck or orphaned workflow is repaired: in place (same ID), or by a fork. */
    mode: 'rewind' | 'fork';
    /** Repairs (rewinds and forks together) per lineage before a dead letter. */
    maxRepairs: number;
    targetVersion: 'latest' | 'original';
    /** Schemas whose `transaction_completion` tables hold DBOS data-source checkpoints afterlife can read. */
    dataSourceSchemas: string[];
  };
  /**
   * Retention of completed workflows and the global timeout (shared/retention); undefined = off (the
   * default: nothing is deleted or cancelled unless asked for).
   */
  retention: {
    /** Keep at most this many completed workflows (the newest by completion); older ones go. */
    maxCompleted: number | undefined;
    /** Delete completed workflows that completed longer ago than this. */
    maxAgeMs: number | undefined;
    /** Cancel workflows (and their children) not completed this long after creation. */
    globalTimeoutMs: number | undefined;
  };
  /** The newest DBOS schema version (dbos_migrations) afterlife accepts at start. */
  dbosSchemaMaxVersion: number;
  /** Thresholds set below their floor with AFTERLIFE_ALLOW_BELOW_FLOOR: every start logs each as a WARNING. */
  belowFloor: string[];
  logLevel: 'DEBUG' | 'INFO' | 'NOTICE' | 'WARNING' | 'ERROR';
}

const SECRET_KEYS = new Set(['DB_PASSWORD']);

/** Turns zod issues into lines that name the variable and never echo a secret. */
function describe(issues: readonly z.core.$ZodIssue[], picked: Record<string, string>): string[] {
  return issues.map((issue) => {
    const key = String(issue.path[0] ?? '(env)');
    // zod's "Invalid input: expected string, received undefined" is how a required variable reads when unset.
    if (issue.code === 'invalid_type' && picked[key] === undefined) return `${key}: not set; ${REQUIRED_HINTS[key] ?? 'it is required'}`;
    const message = SECRET_KEYS.has(key) ? issue.message.replace(/"[^"]*"/g, '"***"') : issue.message;
    return `${key}: ${message}`;
  });
}

/** What a required variable is, said to the person who left it unset. */
const REQUIRED_HINTS: Readonly<Record<string, string>> = {
  DBOS_APPLICATION_NAME:
    "set it to your DBOS application's name (DBOS's `name` in dbos-config.yaml or DBOS.setConfig; the kit registers under it), or pass --app NAME to the CLI",
};

/** Keys the config reads; unknown env variables are ignored, as on any Cloud Run instance. */
const KEYS = Object.keys(EnvSchema.shape) as Array<keyof Parsed>;

/** Every variable name loadConfig reads: the deploy contract (test/infra checks Terraform against it). */
export const CONFIG_KEYS: readonly string[] = KEYS;

/**
 * Names a variable had before the vocabulary settled ("repair" for rewind-or-fork), still read so that no
 * deployment breaks: old name → current name (docs/configuration.md, "Deprecated names"). Setting both to
 * different values is an error, not a silent pick.
 */
export const DEPRECATED_CONFIG_NAMES: Readonly<Record<string, keyof Parsed>> = { MAX_FORKS: 'MAX_REPAIRS' };

/**
 * Other names of a variable, read as it: DBOS's own name for the application name (DBOS reads
 * `DBOS_APP_NAME` in DBOS Cloud, and apps set `DBOSConfig.name` from it), so one setting names the app for
 * DBOS, its kit and the plane that guards it. Two different values are an error naming both.
 */
export const CONFIG_ALIASES: Readonly<Record<string, keyof Parsed>> = { DBOS_APP_NAME: 'DBOS_APPLICATION_NAME' };

/**
 * Each variable's default as the schema applies it (undefined: none, or required). Read from the schema
 * itself so the README table and Terraform's optional() defaults can be checked against the code.
 */
export const CONFIG_DEFAULTS: Readonly<Record<string, string | number | undefined>> = Object.fromEntries(
  KEYS.map((key) => {
    const r = EnvSchema.shape[key].safeParse(undefined);
    return [key, r.success ? (r.data as string | number | undefined) : undefined];
  }),
);

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const e = parseEnv(env);
  return {
    database: databaseOf(e),
    applicationName: e.DBOS_APPLICATION_NAME,
    dbosSchema: e.DBOS_SYSTEM_SCHEMA,
    afterlifeSchema: e.AFTERLIFE_SCHEMA,
    redis: e.REDIS_URL !== undefined ? { url: e.REDIS_URL, keyPrefix: e.REDIS_KEY_PREFIX, tlsCa: e.REDIS_CA_CERT } : undefined,
    project: e.GOOGLE_CLOUD_PROJECT,
    topics: { executorDeaths: e.EXECUTOR_DEATH_TOPIC, deadLetters: e.DEAD_LETTER_TOPIC },
    heartbeatTtlMs: e.HEARTBEAT_TTL_MS,
    heartbeatIntervalMs: e.HEARTBEAT_INTERVAL_MS,
    functionTimeoutS: e.FUNCTION_TIMEOUT_S,
    budgetMarginMs: e.BUDGET_MARGIN_MS,
    drainBudgetMs: e.DRAIN_BUDGET_MS,
    recovery: {
      batchSize: e.RECOVERY_BATCH_SIZE,
      lockTtlMs: e.LOCK_TTL_MS,
      orphanedVersionPolicy: e.ORPHANED_VERSION_POLICY,
    },
    reaper: {
      tickMs: e.REAPER_TICK_MS,
      stuckAfterMs: e.STUCK_AFTER_MS,
      stuckPolicy: e.STUCK_POLICY,
      unknownExecutorGraceMs: e.UNKNOWN_EXECUTOR_GRACE_MS,
      orphanedVersionGraceMs: e.ORPHANED_VERSION_GRACE_MS,
      leaseMs: e.REAPER_LEASE_MS,
      recovery: e.REAPER_RECOVERY,
      livenessEvidence: e.REAPER_LIVENESS_EVIDENCE,
      livenessSettleMs: e.REAPER_LIVENESS_SETTLE_MS,
      divergedLookbackMs: e.REAPER_DIVERGED_LOOKBACK_MS,
      sessionEvidence: e.REAPER_SESSION_EVIDENCE,
    },
    repair: {
      mode: e.REPAIR_MODE,
      maxRepairs: e.MAX_REPAIRS,
      targetVersion: e.FORK_TARGET_VERSION,
      dataSourceSchemas: e.DATASOURCE_SCHEMAS.split(',').map((x) => x.trim()),
    },
    retention: {
      maxCompleted: e.RETENTION_MAX_COMPLETED || undefined,
      maxAgeMs: e.RETENTION_MAX_AGE_MS || undefined,
      globalTimeoutMs: e.WORKFLOW_GLOBAL_TIMEOUT_MS || undefined,
    },
    dbosSchemaMaxVersion: e.DBOS_SCHEMA_MAX_VERSION,
    belowFloor: floorProblems(e, allowedBelowFloor(e)).warnings,
    logLevel: e.LOG_LEVEL,
  };
}

/**
 * The known variables, with deprecated names read for their new ones, parsed; every problem (field
 * errors, cross-field rules, a deprecated name contradicting its new one) reported together.
 */
function parseEnv(env: Record<string, string | undefined>): Parsed {
  const picked: Record<string, string> = {};
  for (const key of KEYS) {
    const value = env[key];
    // An empty variable is how Terraform and shells spell "unset".
    if (value !== undefined && value !== '') picked[key] = value;
  }
  const renamed: string[] = [];
  const otherNames = [
    ...Object.entries(DEPRECATED_CONFIG_NAMES).map(([old, key]) => [old, key, `deprecated name of ${key}`, `unset ${old}`] as const),
    ...Object.entries(CONFIG_ALIASES).map(([alias, key]) => [alias, key, `another name of ${key}`, `unset one of them`] as const),
  ];
  for (const [old, key, what, fix] of otherNames) {
    const value = env[old];
    if (value === undefined || value === '') continue;
    if (picked[key] === undefined) picked[key] = value;
    else if (picked[key] !== value)
      renamed.push(`${old}: ${what}, which is set to another value (${key}=${picked[key]}, ${old}=${value}); ${fix}`);
  }
  const parsed = EnvSchema.safeParse(picked);
  // Cross-field rules are checked on the raw values so they are reported together with field errors.
  const tls = redisTlsProblem(picked.REDIS_URL, picked.REDIS_CA_CERT);
  const problems = [
    ...(parsed.success
      ? [
          ...relationProblems(parsed.data),
          ...settingRelationProblems(parsed.data),
          ...floorProblems(parsed.data, allowedBelowFloor(parsed.data)).problems,
        ]
      : describe(parsed.error.issues, picked)),
    ...databaseTargetProblems(picked),
    ...(tls ? [tls] : []),
    ...renamed,
  ];
  if (!parsed.success || problems.length) throw new ConfigError(problems);
  return parsed.data;
}

function allowedBelowFloor(e: Parsed): string[] {
  return (e[ALLOW_BELOW_FLOOR] ?? '').split(',').map((x) => x.trim());
}

/** A Cloud SQL connector target when INSTANCE_CONNECTION_NAME is set, else the URL. */
function databaseOf(e: Parsed): Config['database'] {
  const pool = {
    poolMax: e.DB_POOL_MAX,
    connectTimeoutMs: e.DB_CONNECT_TIMEOUT_MS,
    statementTimeoutMs: e.DB_STATEMENT_TIMEOUT_MS,
  };
  return e.INSTANCE_CONNECTION_NAME !== undefined
    ? {
        kind: 'connector',
        instanceConnectionName: e.INSTANCE_CONNECTION_NAME,
        user: e.DB_USER ?? '',
        database: e.DB_NAME ?? '',
        password: e.DB_PASSWORD,
        ipType: e.DB_IP_TYPE,
        iamAuth: e.DB_PASSWORD === undefined,
        ...pool,
      }
    : { kind: 'url', url: e.DATABASE_URL ?? '', ...pool };
}

/** For logs and `afterlife-plane status`: the config with secrets and credentials in URLs masked. */
export function redactedConfig(config: Config): Record<string, unknown> {
  const maskUrl = (u: string) => {
    const url = new URL(u);
    if (url.password) url.password = '***';
    return url.toString();
  };
  const database =
    config.database.kind === 'url'
      ? { ...config.database, url: maskUrl(config.database.url) }
      : { ...config.database, password: config.database.password === undefined ? undefined : '***' };
  return {
    ...config,
    database,
    redis: config.redis ? { ...config.redis, url: maskUrl(config.redis.url) } : undefined,
  };
}
