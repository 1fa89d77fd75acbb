import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { KeyPrefix } from '../contract/heartbeat.js';
import { LivenessLeaseMs } from '../contract/lease.js';
import { RedisCaCert, redisTlsProblem } from '../contract/redisTls.js';
import type { ExecutorKitOptions } from './options.js';

/**
 * The kit's options from the environment (attachExecutor reads them itself; explicit options win), validated like afterlife's own config (same variable names
 * where they mean the same thing), so an app on Cloud Run configures it with env vars alone.
 */
const int = (min: number) => z.coerce.number().int().min(min).optional();
const EnvSchema = z.object({
  AFTERLIFE_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  DBOS_SYSTEM_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  DBOS_SYSTEM_SCHEMA: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/)
    .optional(),
  AFTERLIFE_SCHEMA: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/)
    .optional(),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .optional(),
  REDIS_KEY_PREFIX: KeyPrefix.optional(),
  REDIS_CA_CERT: RedisCaCert.optional(),
  HEARTBEAT_TTL_MS: int(500),
  HEARTBEAT_INTERVAL_MS: int(50),
  /** `off` only behind a pooler in transaction mode (session locks do not hold there). */
  AFTERLIFE_LIVENESS: z.enum(['on', 'off']).optional(),
  /** The liveness lease in ms (default 8000; 3000–300000): the server ends a session silent this long. */
  AFTERLIFE_LIVENESS_LEASE_MS: LivenessLeaseMs.optional(),
  /** A direct route for the liveness connection when DBOS's URL goes through a pooler. */
  AFTERLIFE_LIVENESS_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  GOOGLE_CLOUD_PROJECT: z.string().min(1).optional(),
  EXECUTOR_DEATH_TOPIC: z.string().min(1).optional(),
  AFTERLIFE_PUBSUB_ENDPOINT: z
    .string()
    .regex(/^https?:\/\/[^/\s]+\/?$/, 'must be an http(s):// origin')
    .optional(),
  AFTERLIFE_PUBLISH: z.enum(['pubsub', 'none']).default('pubsub'),
  AFTERLIFE_SHUTDOWN_GRACE_MS: int(1_000),
  AFTERLIFE_SHUTDOWN_MARGIN_MS: int(0),
  AFTERLIFE_EXIT_AFTER_DRAIN: z.enum(['true', 'false']).optional(),
  /** Single-process dev setups only: with DBOS's shared default ID, every launch recovers its siblings' work. */
  AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID: z.enum(['true', 'false']).optional(),
  /** `false`: a failed attach rejects instead of exiting, and database trouble leaves the kit running degraded. */
  AFTERLIFE_ATTACH_FATAL: z.enum(['true', 'false']).optional(),
});

export function executorOptionsFromEnv(env: Record<string, string | undefined> = process.env): ExecutorKitOptions {
  const picked = Object.fromEntries(Object.keys(EnvSchema.shape).flatMap((k) => (env[k] ? [[k, env[k]]] : [])));
  const parsed = EnvSchema.safeParse(picked);
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`));
  const e = parsed.data;
  const tls = redisTlsProblem(e.REDIS_URL, e.REDIS_CA_CERT);
  if (tls) throw new ConfigError([tls]);
  // Optional here: attachExecutor reads DBOS's own URL when neither is set (resolve.ts).
  const databaseUrl = e.AFTERLIFE_DATABASE_URL ?? e.DBOS_SYSTEM_DATABASE_URL;
  return {
    ...(databaseUrl ? { databaseUrl } : {}),
    publisher: e.AFTERLIFE_PUBLISH,
    ...(e.DBOS_SYSTEM_SCHEMA ? { dbosSchema: e.DBOS_SYSTEM_SCHEMA } : {}),
    ...(e.AFTERLIFE_SCHEMA ? { afterlifeSchema: e.AFTERLIFE_SCHEMA } : {}),
    ...(e.REDIS_URL ? { redisUrl: e.REDIS_URL } : {}),
    ...(e.REDIS_CA_CERT ? { redisTlsCa: e.REDIS_CA_CERT } : {}),
    ...(e.REDIS_KEY_PREFIX ? { keyPrefix: e.REDIS_KEY_PREFIX } : {}),
    ...(e.HEARTBEAT_TTL_MS ? { heartbeatTtlMs: e.HEARTBEAT_TTL_MS } : {}),
    ...(e.HEARTBEAT_INTERVAL_MS ? { heartbeatIntervalMs: e.HEARTBEAT_INTERVAL_MS } : {}),
    ...(e.AFTERLIFE_LIVENESS ? { liveness: e.AFTERLIFE_LIVENESS === 'on' } : {}),
    ...(e.AFTERLIFE_LIVENESS_LEASE_MS !== undefined ? { livenessLeaseMs: e.AFTERLIFE_LIVENESS_LEASE_MS } : {}),
    ...(e.AFTERLIFE_LIVENESS_DATABASE_URL ? { livenessDatabaseUrl: e.AFTERLIFE_LIVENESS_DATABASE_URL } : {}),
    ...(e.GOOGLE_CLOUD_PROJECT ? { project: e.GOOGLE_CLOUD_PROJECT } : {}),
    ...(e.EXECUTOR_DEATH_TOPIC ? { topic: e.EXECUTOR_DEATH_TOPIC } : {}),
    ...(e.AFTERLIFE_PUBSUB_ENDPOINT ? { pubsubEndpoint: e.AFTERLIFE_PUBSUB_ENDPOINT } : {}),
    ...(e.AFTERLIFE_SHUTDOWN_GRACE_MS ? { shutdownGraceMs: e.AFTERLIFE_SHUTDOWN_GRACE_MS } : {}),
    ...(e.AFTERLIFE_SHUTDOWN_MARGIN_MS !== undefined ? { shutdownMarginMs: e.AFTERLIFE_SHUTDOWN_MARGIN_MS } : {}),
    ...(e.AFTERLIFE_EXIT_AFTER_DRAIN ? { exitAfterPlannedDrain: e.AFTERLIFE_EXIT_AFTER_DRAIN === 'true' } : {}),
    ...(e.AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID ? { allowLocalExecutorId: e.AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID === 'true' } : {}),
    ...(e.AFTERLIFE_ATTACH_FATAL ? { fatal: e.AFTERLIFE_ATTACH_FATAL === 'true' } : {}),
  };
}
