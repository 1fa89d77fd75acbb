import { ConfigError } from '../errors.js';
import { redisTlsProblem } from '../contract/redisTls.js';
import { SETTING_NAMES, type SettingName } from '../contract/settings.js';
import { durationMs, matching, oneOf, postgresUrl, readVariables, type Reader, shared } from './envReader.js';
import type { ExecutorKitOptions } from './options.js';

/**
 * The kit's options from the environment (attachExecutor reads them itself; explicit options win), so an app
 * on Cloud Run configures it with env vars alone. The settings the plane reads too (the heartbeat's TTL and
 * interval, the schemas, Redis, the topic) are parsed by the contract (contract/settings.ts), the plane's own
 * config calls the same parser: same values accepted, same messages. The kit's own settings follow the same
 * rules (plain decimal integers, durations a timer can hold). No zod: the kit stays small in the app.
 */
const KIT_ONLY = {
  AFTERLIFE_DATABASE_URL: postgresUrl,
  DBOS_SYSTEM_DATABASE_URL: postgresUrl,
  /** `off` only behind a pooler in transaction mode (session locks do not hold there). */
  AFTERLIFE_LIVENESS: oneOf('on', 'off'),
  /** A direct route for the liveness connection when DBOS's URL goes through a pooler. */
  AFTERLIFE_LIVENESS_DATABASE_URL: postgresUrl,
  AFTERLIFE_PUBSUB_ENDPOINT: matching(/^https?:\/\/[^/\s]+\/?$/, 'must be an http(s):// origin'),
  AFTERLIFE_PUBLISH: oneOf('pubsub', 'none'),
  AFTERLIFE_SHUTDOWN_GRACE_MS: durationMs(1_000),
  AFTERLIFE_SHUTDOWN_MARGIN_MS: durationMs(0),
  AFTERLIFE_EXIT_AFTER_DRAIN: oneOf('true', 'false'),
  /** Single-process dev setups only: with DBOS's shared default ID, every launch recovers its siblings' work. */
  AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID: oneOf('true', 'false'),
  /** `false`: a failed attach rejects instead of exiting, and database trouble leaves the kit running degraded. */
  AFTERLIFE_ATTACH_FATAL: oneOf('true', 'false'),
} satisfies Record<string, Reader>;

const READERS: Record<string, Reader> = {
  ...KIT_ONLY,
  ...Object.fromEntries(SETTING_NAMES.map((n) => [n, shared(n)])),
};

/** Every variable the kit reads (the contract's settings among them). */
export const KIT_ENV_KEYS: readonly string[] = Object.keys(READERS);

type Env = Partial<Record<keyof typeof KIT_ONLY | SettingName, string | number>>;

export function executorOptionsFromEnv(env: Record<string, string | undefined> = process.env): ExecutorKitOptions {
  const e = readVariables(env, READERS) as Env;
  const str = (k: keyof Env) => e[k] as string | undefined;
  const num = (k: keyof Env) => e[k] as number | undefined;
  const tls = redisTlsProblem(str('REDIS_URL'), str('REDIS_CA_CERT'));
  if (tls) throw new ConfigError([tls]);
  // Optional here: attachExecutor reads DBOS's own URL when neither is set (resolve.ts).
  const databaseUrl = str('AFTERLIFE_DATABASE_URL') ?? str('DBOS_SYSTEM_DATABASE_URL');
  const opt = <T>(key: keyof ExecutorKitOptions, value: T | undefined) => (value === undefined ? {} : { [key]: value });
  const flag = (k: keyof Env) => (str(k) === undefined ? undefined : str(k) === 'true');
  const liveness = str('AFTERLIFE_LIVENESS');
  return {
    ...opt('databaseUrl', databaseUrl),
    publisher: (str('AFTERLIFE_PUBLISH') ?? 'pubsub') as 'pubsub' | 'none',
    ...opt('dbosSchema', str('DBOS_SYSTEM_SCHEMA')),
    ...opt('afterlifeSchema', str('AFTERLIFE_SCHEMA')),
    ...opt('redisUrl', str('REDIS_URL')),
    ...opt('redisTlsCa', str('REDIS_CA_CERT')),
    ...opt('keyPrefix', str('REDIS_KEY_PREFIX')),
    ...opt('heartbeatTtlMs', num('HEARTBEAT_TTL_MS')),
    ...opt('heartbeatIntervalMs', num('HEARTBEAT_INTERVAL_MS')),
    ...opt('liveness', liveness === undefined ? undefined : liveness === 'on'),
    ...opt('livenessLeaseMs', num('AFTERLIFE_LIVENESS_LEASE_MS')),
    ...opt('livenessDatabaseUrl', str('AFTERLIFE_LIVENESS_DATABASE_URL')),
    ...opt('project', str('GOOGLE_CLOUD_PROJECT')),
    ...opt('topic', str('EXECUTOR_DEATH_TOPIC')),
    ...opt('pubsubEndpoint', str('AFTERLIFE_PUBSUB_ENDPOINT')),
    ...opt('shutdownGraceMs', num('AFTERLIFE_SHUTDOWN_GRACE_MS')),
    ...opt('shutdownMarginMs', num('AFTERLIFE_SHUTDOWN_MARGIN_MS')),
    ...opt('exitAfterPlannedDrain', flag('AFTERLIFE_EXIT_AFTER_DRAIN')),
    ...opt('allowLocalExecutorId', flag('AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID')),
    ...opt('fatal', flag('AFTERLIFE_ATTACH_FATAL')),
  };
}
