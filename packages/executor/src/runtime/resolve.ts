import { ConfigError } from '../errors.js';
import { checkSettingNumber, SETTINGS, settingRelationProblems } from '../contract/settings.js';
import type { DbosApp } from './dbosInternals.js';
import { executorOptionsFromEnv } from './env.js';
import type { ExecutorKitOptions } from './options.js';

/**
 * The kit's options where DBOS already knows the answer: the system database URL and schema and the
 * application name come from the configuration DBOS launched with (the executor ID and version are DBOS's
 * own). Precedence: explicit options, then the environment, then DBOS — except DBOS_SYSTEM_DATABASE_URL,
 * which only stands in when DBOS's URL cannot be read (the URL DBOS actually uses is the better answer).
 * Whatever is still missing is a ConfigError naming what to set.
 */
export type ResolvedKitOptions = ExecutorKitOptions & { databaseUrl: string; applicationName: string };

export interface Resolution {
  options: ResolvedKitOptions;
  /** Where the database URL came from, for the attach log line. */
  databaseUrlFrom: 'options' | 'AFTERLIFE_DATABASE_URL' | 'dbos-config' | 'DBOS_SYSTEM_DATABASE_URL';
}

export function resolveKitOptions(
  app: DbosApp,
  explicit: Partial<ExecutorKitOptions>,
  env: Record<string, string | undefined>,
): Resolution {
  const fromEnv = executorOptionsFromEnv(env);
  const dbos = app.config;
  const dbosUrl = dbos && !dbos.ownPool ? dbos.systemDatabaseUrl : undefined;
  const afterlifeUrl = env.AFTERLIFE_DATABASE_URL ? fromEnv.databaseUrl : undefined;
  const [databaseUrl, databaseUrlFrom] = explicit.databaseUrl
    ? ([explicit.databaseUrl, 'options'] as const)
    : afterlifeUrl
      ? ([afterlifeUrl, 'AFTERLIFE_DATABASE_URL'] as const)
      : dbosUrl
        ? ([dbosUrl, 'dbos-config'] as const)
        : ([fromEnv.databaseUrl, 'DBOS_SYSTEM_DATABASE_URL'] as const);
  const applicationName = explicit.applicationName ?? app.applicationName;
  const problems: string[] = [];
  if (!databaseUrl) {
    problems.push(
      dbos?.ownPool
        ? 'databaseUrl: DBOS was given a pool (systemDatabasePool), so its URL is not the database it uses: set AFTERLIFE_DATABASE_URL (or pass databaseUrl) to the same database'
        : 'databaseUrl: DBOS’s launched configuration could not be read: set AFTERLIFE_DATABASE_URL or DBOS_SYSTEM_DATABASE_URL (or pass databaseUrl)',
    );
  }
  if (!applicationName) problems.push('applicationName: DBOS’s application name could not be read: pass applicationName');
  // Programmatic values meet the bounds their variables have (the contract's), so neither path can set what
  // the plane would misread.
  for (const [key, name] of [
    ['heartbeatTtlMs', 'HEARTBEAT_TTL_MS'],
    ['heartbeatIntervalMs', 'HEARTBEAT_INTERVAL_MS'],
  ] as const) {
    const value = explicit[key];
    const problem = value === undefined ? undefined : checkSettingNumber(name, value);
    if (problem) problems.push(`${key}: ${problem}`);
  }
  // The pair as the kit will run with it (options over env over defaults), judged by the contract as the plane judges its own.
  const ttl = explicit.heartbeatTtlMs ?? fromEnv.heartbeatTtlMs ?? SETTINGS.HEARTBEAT_TTL_MS.default;
  const interval = explicit.heartbeatIntervalMs ?? fromEnv.heartbeatIntervalMs ?? SETTINGS.HEARTBEAT_INTERVAL_MS.default;
  if (!problems.length) problems.push(...settingRelationProblems({ HEARTBEAT_TTL_MS: ttl, HEARTBEAT_INTERVAL_MS: interval }));
  if (problems.length) throw new ConfigError(problems);
  const schema = fromEnv.dbosSchema ?? dbos?.systemDatabaseSchemaName;
  return {
    options: {
      ...fromEnv,
      ...(schema ? { dbosSchema: schema } : {}),
      ...definedOnly(explicit),
      databaseUrl: databaseUrl as string,
      applicationName: applicationName as string,
    },
    databaseUrlFrom,
  };
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
