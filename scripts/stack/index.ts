import type { PubSub } from '@google-cloud/pubsub';
import { consoleLogger, type Logger } from '../../packages/executor/src/log.js';
import { startDeathRouter } from './deathRouter.js';
import { registeredTargets, serveFunction, type ServedFunction, type Target } from './functions.js';
import { type GuardAll, guardAll, type GuardAllOptions, type GuardedApplication } from './guardAll.js';
import { startMemoryBridge, type MemoryBridge } from './memoryBridge.js';
import { startPostgres, type StackPostgres } from './postgres.js';
import { DEFAULT_EMULATOR_BIN, emulatorBinary, startEmulator, type StackEmulator } from './pubsub.js';
import { ensurePushSubscription } from './push.js';
import { startRedis, type StackRedis } from './redis.js';
import { startScheduler, type Scheduler } from './scheduler.js';

/**
 * The local stack behind `npm start` and `npm run demo`: Postgres, Redis, Pub/Sub (emulator or in-process
 * bridge), one functions-framework process per registered target, a push subscription (or the in-process
 * bridge) delivering death notices to executorDeath, and a scheduler calling the reaper. Everything it starts, it stops, in reverse.
 */
export const LOCAL_PROJECT = 'afterlife-local';
export const LOCAL_SUBSCRIPTION = 'executor-death-local';
export const DEFAULT_LOCAL_APP = 'demo';

export interface StackOptions {
  env?: Record<string, string | undefined>;
  logger?: Logger;
  /**
   * Every line the function processes print (JSON logs), with the target's name; `applicationName` is set
   * for the functions of an application guarded after the first (scripts/stack/guardAll.ts).
   */
  onFunctionLine?: ((target: Target, line: string, applicationName?: string) => void) | undefined;
  /** Once per application guarded after the first, when its functions listen. */
  onGuarded?: (g: GuardedApplication) => void;
  /** Once per application whose set was stopped because it had no live kit for LOCAL_GUARD_IDLE_MS. */
  onUnguarded?: (applicationName: string) => void;
  /** How often the local scheduler calls the reaper (Cloud Scheduler's floor is a minute). */
  scheduleMs?: number;
  /** Skip the emulator even when installed (the in-process bridge instead); also `LOCAL_PUBSUB=bridge`. */
  forceBridge?: boolean;
  /**
   * Ctrl-C while starting. startStack then stops what it has started so far, in reverse, and rejects with
   * the signal's reason: the caller has no Stack to stop yet, and the children run in their own process
   * groups, so nothing else would reach them.
   */
  signal?: AbortSignal;
  /** One line per part as it starts (what, where), before it is ready: `npm start` prints them. */
  onProgress?: (line: string) => void;
}

export interface Stack {
  applicationName: string;
  applicationNameDefaulted: boolean;
  project: string;
  deathTopic: string;
  deadLetterTopic: string;
  postgres: StackPostgres;
  redis: StackRedis;
  pubsub: { kind: 'emulator'; host: string } | { kind: 'bridge'; url: string; reason: string };
  functions: ServedFunction[];
  scheduler: Scheduler | undefined;
  /** Every application guarded so far: the first, then each whose kits registered (scripts/stack/guardAll.ts). */
  guarded(): GuardedApplication[];
  /** The environment the functions run with: also what a CLI or an executor needs to join the stack. */
  env: Record<string, string>;
  /** Publishes a death notice (or any JSON) on a local topic the way a real publisher would. */
  publish(topic: string, json: unknown, attributes: Record<string, string>, orderingKey?: string): Promise<string>;
  stop(): Promise<void>;
}

export async function startStack(o: StackOptions = {}): Promise<Stack> {
  const env = o.env ?? process.env;
  const logger = o.logger ?? consoleLogger({ component: 'stack' });
  const stoppers = stopInReverse(logger);
  const signal = o.signal;
  const progress = o.onProgress ?? (() => {});
  // Between steps: each part is registered for stopping before this runs, so an abort stops it too.
  const checkpoint = () => signal?.throwIfAborted();

  try {
    const names = stackNames(env);
    checkpoint();
    if (env.DATABASE_URL) progress('postgres: DATABASE_URL, migrating');
    const postgres = await startPostgres({
      databaseUrl: env.DATABASE_URL || undefined,
      dbosSchema: names.dbosSchema,
      afterlifeSchema: names.afterlifeSchema,
      onProgress: progress,
      ...(signal ? { signal } : {}),
    });
    stoppers.push('postgres', postgres.stop);
    checkpoint();
    if (!env.REDIS_URL) progress('redis: starting a local redis-server if one is installed');
    const redis = await startRedis({ redisUrl: env.REDIS_URL || undefined, ...(signal ? { signal } : {}) });
    stoppers.push('redis', redis.stop);
    checkpoint();
    if (redis.kind === 'none') logger.warn(`${redis.reason}: running DEGRADED (no locks, no heartbeats, the reaper declares nothing dead)`);

    const bin = (o.forceBridge ?? env.LOCAL_PUBSUB === 'bridge') ? undefined : emulatorBinary(env);
    const transport = await startTransport(bin, names.project, logger, stoppers, progress, signal);
    checkpoint();

    const fnEnv = functionEnv(env, names, postgres, redis, transport);
    const functions = await serveFunctions(fnEnv, o, stoppers, progress, checkpoint);
    const deathFn = functions.find((f) => f.target === 'executorDeath');
    if (!deathFn) throw new Error('the build registers no executorDeath target; run `npm run build`');

    const scheduleMs = o.scheduleMs ?? Number(env.LOCAL_SCHEDULE_MS || 10_000);
    const guard = guardAll({
      ...guardBounds(env),
      databaseUrl: postgres.url,
      dbosSchema: names.dbosSchema,
      afterlifeSchema: names.afterlifeSchema,
      first: { applicationName: names.applicationName, functions },
      fnEnv,
      scheduleMs,
      schedulerTimeoutMs: schedulerTimeoutMs(env),
      ...guardCallbacks(o),
      logger,
    });
    stoppers.push('guard', guard.stop);

    const publish = await routeDeathNotices(transport, names, guard, deathFn.url, logger, stoppers);
    checkpoint();

    const scheduler = scheduleReaper(functions, scheduleMs, schedulerTimeoutMs(env), logger, stoppers);
    checkpoint();

    return {
      applicationName: names.applicationName,
      applicationNameDefaulted: !env.DBOS_APPLICATION_NAME && !env.DBOS_APP_NAME,
      project: names.project,
      deathTopic: names.deathTopic,
      deadLetterTopic: names.deadLetterTopic,
      postgres,
      redis,
      pubsub: transport.emulator
        ? { kind: 'emulator', host: transport.emulator.host }
        : {
            kind: 'bridge',
            url: transport.memory?.url ?? '',
            reason:
              bin === undefined && env.LOCAL_PUBSUB === 'bridge'
                ? 'LOCAL_PUBSUB=bridge'
                : `no Pub/Sub emulator at ${env.PUBSUB_EMULATOR_BIN || DEFAULT_EMULATOR_BIN}`,
          },
      functions,
      scheduler,
      guarded: () => guard.guarded(),
      env: fnEnv,
      publish,
      stop: stoppers.stop,
    };
  } catch (err) {
    await stoppers.stop();
    throw err;
  }
}

function guardCallbacks(o: StackOptions): Pick<GuardAllOptions, 'onFunctionLine' | 'onGuarded' | 'onUnguarded'> {
  return {
    ...(o.onFunctionLine ? { onFunctionLine: o.onFunctionLine } : {}),
    ...(o.onGuarded ? { onGuarded: o.onGuarded } : {}),
    ...(o.onUnguarded ? { onUnguarded: o.onUnguarded } : {}),
  };
}

interface Stoppers {
  push(name: string, fn: () => Promise<void>): void;
  /** Everything pushed so far, last first. */
  stop(): Promise<void>;
}

function stopInReverse(logger: Logger): Stoppers {
  const stoppers: Array<{ name: string; fn: () => Promise<void> }> = [];
  // Once: a signal handler and a failing start can both ask, and a second pass must not run the
  // stoppers again (or reverse the list under the first).
  let stopped: Promise<void> | undefined;
  return {
    push: (name, fn) => {
      stoppers.push({ name, fn });
    },
    stop: () =>
      (stopped ??= (async () => {
        for (const s of stoppers.reverse()) {
          await s.fn().catch((err: unknown) => logger.warn(`stopping ${s.name} failed`, { err }));
        }
        stoppers.length = 0;
      })()),
  };
}

interface StackNames {
  applicationName: string;
  project: string;
  deathTopic: string;
  deadLetterTopic: string;
  dbosSchema: string;
  afterlifeSchema: string;
}

function stackNames(env: Record<string, string | undefined>): StackNames {
  const deathTopic = env.EXECUTOR_DEATH_TOPIC || 'executor-deaths';
  return {
    // DBOS_APP_NAME is DBOS's own variable, read by the plane as the same setting.
    applicationName: env.DBOS_APPLICATION_NAME || env.DBOS_APP_NAME || DEFAULT_LOCAL_APP,
    project: env.GOOGLE_CLOUD_PROJECT || LOCAL_PROJECT,
    deathTopic,
    deadLetterTopic: `${deathTopic}-dead-letter`,
    dbosSchema: env.DBOS_SYSTEM_SCHEMA || 'dbos',
    afterlifeSchema: env.AFTERLIFE_SCHEMA || 'afterlife',
  };
}

/** Exactly one of the two: the emulator when its binary is there, else the in-process bridge. */
interface Transport {
  emulator?: StackEmulator;
  memory?: MemoryBridge;
}

async function startTransport(
  bin: string | undefined,
  project: string,
  logger: Logger,
  stoppers: Stoppers,
  progress: (line: string) => void,
  signal: AbortSignal | undefined,
): Promise<Transport> {
  if (bin) {
    progress(`pub/sub: starting the emulator (${bin})`);
    const emulator = await startEmulator(bin, signal);
    stoppers.push('pubsub emulator', emulator.stop);
    return { emulator };
  }
  const memory = await startMemoryBridge({ project, logger });
  stoppers.push('in-process bridge', memory.close);
  return { memory };
}

/** The environment every function process runs with: the caller's, pointed at this stack's parts. */
function functionEnv(
  env: Record<string, string | undefined>,
  names: StackNames,
  postgres: StackPostgres,
  redis: StackRedis,
  transport: Transport,
): Record<string, string> {
  const fnEnv: Record<string, string> = {
    ...definedOnly(env),
    DATABASE_URL: postgres.url,
    DBOS_APPLICATION_NAME: names.applicationName,
    DBOS_SYSTEM_SCHEMA: names.dbosSchema,
    AFTERLIFE_SCHEMA: names.afterlifeSchema,
    GOOGLE_CLOUD_PROJECT: names.project,
    EXECUTOR_DEATH_TOPIC: names.deathTopic,
    METADATA_SERVER_DETECTION: 'none',
  };
  // Each set of functions is told its application by DBOS_APPLICATION_NAME alone (the plane refuses the two
  // variables set to different values).
  delete fnEnv.DBOS_APP_NAME;
  if (redis.url) fnEnv.REDIS_URL = redis.url;
  else delete fnEnv.REDIS_URL;
  if (transport.emulator) fnEnv.PUBSUB_EMULATOR_HOST = transport.emulator.host;
  if (transport.memory) fnEnv.PUBSUB_BRIDGE_URL = transport.memory.url;
  return fnEnv;
}

async function serveFunctions(
  fnEnv: Record<string, string>,
  o: StackOptions,
  stoppers: Stoppers,
  progress: (line: string) => void,
  checkpoint: () => void,
): Promise<ServedFunction[]> {
  const functions: ServedFunction[] = [];
  for (const target of registeredTargets()) {
    const served = await serveFunction(target, fnEnv, o.onFunctionLine ? (line) => o.onFunctionLine?.(target, line) : undefined, {
      onSpawn: (port) => progress(`function ${target}: starting functions-framework on 127.0.0.1:${port}`),
      ...(o.signal ? { signal: o.signal } : {}),
    });
    stoppers.push(`function ${target}`, () => served.proc.stop());
    functions.push(served);
    checkpoint();
  }
  return functions;
}

/** Notices go through the router, which hands each to its own application's executorDeath. */
async function routeDeathNotices(
  transport: Transport,
  names: StackNames,
  guard: GuardAll,
  fallbackUrl: string,
  logger: Logger,
  stoppers: Stoppers,
): Promise<Stack['publish']> {
  const router = await startDeathRouter({ urlFor: (app) => guard.deathUrl(app), coming: (app) => guard.coming(app), fallbackUrl }, logger);
  stoppers.push('death-notice router', router.close);
  return deliverDeathNotices(transport, names, router.url, stoppers);
}

/** Subscribes the router to the death topic, and returns how the stack publishes on a topic. */
async function deliverDeathNotices(
  transport: Transport,
  names: StackNames,
  deathFnUrl: string,
  stoppers: Stoppers,
): Promise<Stack['publish']> {
  const { emulator, memory } = transport;
  if (emulator) {
    // No credentials locally: without this google-auth-library probes the GCE metadata server and warns.
    process.env.METADATA_SERVER_DETECTION ??= 'none';
    const { PubSub } = await import('@google-cloud/pubsub');
    const pubsub: PubSub = new PubSub({ projectId: names.project, apiEndpoint: emulator.host });
    stoppers.push('pubsub client', () => pubsub.close());
    // As in production (infra/pubsub.tf): the emulator pushes raw push bodies to the function's
    // /projects/<p>/topics/<t> path and dead-letters what keeps failing.
    await ensurePushSubscription(pubsub, {
      topic: names.deathTopic,
      subscription: LOCAL_SUBSCRIPTION,
      functionUrl: deathFnUrl,
      deadLetterTopic: names.deadLetterTopic,
      maxDeliveryAttempts: 5,
    });
    return async (topic, json, attributes, orderingKey) =>
      pubsub.topic(topic, { messageOrdering: true }).publishMessage({ json, attributes, ...(orderingKey ? { orderingKey } : {}) });
  }
  if (memory) {
    memory.subscribe(names.deathTopic, LOCAL_SUBSCRIPTION, deathFnUrl, { deadLetterTopic: names.deadLetterTopic, maxDeliveryAttempts: 5 });
    return async (topic, json, attributes, orderingKey) => memory.publish(topic, json, attributes, orderingKey);
  }
  throw new Error('unreachable: no Pub/Sub');
}

/** Default LOCAL_MAX_APPLICATIONS: the first application and three more, about 1.1 GB of function processes. */
export const DEFAULT_MAX_APPLICATIONS = 4;
/** Default LOCAL_GUARD_IDLE_MS: an application's set outlives its last kit by five minutes (a restart keeps it). */
export const DEFAULT_GUARD_IDLE_MS = 300_000;

/** How many applications the stack guards at most, and how long a set outlives its last live kit. */
export function guardBounds(env: Record<string, string | undefined>): { maxApplications: number; idleStopMs: number } {
  const read = (name: string, def: number, min: number, max: number) => {
    const raw = env[name];
    if (raw === undefined || raw === '') return def;
    if (!/^(0|[1-9][0-9]{0,9})$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      throw new Error(`${name} must be a plain decimal integer from ${min} to ${max} (got ${JSON.stringify(raw)})`);
    }
    return Number(raw);
  };
  return {
    maxApplications: read('LOCAL_MAX_APPLICATIONS', DEFAULT_MAX_APPLICATIONS, 1, 50),
    idleStopMs: read('LOCAL_GUARD_IDLE_MS', DEFAULT_GUARD_IDLE_MS, 0, 86_400_000),
  };
}

/** As Terraform's attempt_deadline: the whole invocation (it ticks until its budget ends) plus slack. */
function schedulerTimeoutMs(env: Record<string, string | undefined>): number {
  return (Number(env.FUNCTION_TIMEOUT_S || 60) + 30) * 1_000;
}

/** Cloud Scheduler's stand-in calling the reaper, when the build has one. */
function scheduleReaper(
  functions: ServedFunction[],
  everyMs: number,
  timeoutMs: number,
  logger: Logger,
  stoppers: Stoppers,
): Scheduler | undefined {
  const reaper = functions.find((f) => f.target === 'reaper');
  if (!reaper) return undefined;
  const scheduler = startScheduler({ url: reaper.url, everyMs, logger, timeoutMs });
  stoppers.push('scheduler', () => scheduler.stop());
  return scheduler;
}

function definedOnly(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  return out;
}
