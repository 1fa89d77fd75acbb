import type { PubSub } from '@google-cloud/pubsub';
import { type Bridge, startPullBridge } from '../../shared/events/bridge.js';
import { consoleLogger, type Logger } from '../../shared/log.js';
import { registeredTargets, serveFunction, type ServedFunction, type Target } from './functions.js';
import { startMemoryBridge, type MemoryBridge } from './memoryBridge.js';
import { startPostgres, type StackPostgres } from './postgres.js';
import { DEFAULT_EMULATOR_BIN, emulatorBinary, startEmulator, type StackEmulator } from './pubsub.js';
import { startRedis, type StackRedis } from './redis.js';
import { startScheduler, type Scheduler } from './scheduler.js';

/**
 * The local stack behind `npm start` and `npm run demo`: Postgres, Redis, Pub/Sub (emulator or in-process
 * bridge), one functions-framework process per registered target, the Eventarc stand-in delivering death
 * notices to executorDeath, and a scheduler calling the reaper. Everything it starts, it stops, in reverse.
 */
export const LOCAL_PROJECT = 'afterlife-local';
export const LOCAL_SUBSCRIPTION = 'executor-death-local';
export const DEFAULT_LOCAL_APP = 'demo';

export interface StackOptions {
  env?: Record<string, string | undefined>;
  logger?: Logger;
  /** Every line the function processes print (JSON logs), with the target's name. */
  onFunctionLine?: (target: Target, line: string) => void;
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
  /** The environment the functions run with: also what a CLI or an executor needs to join the stack. */
  env: Record<string, string>;
  /** Publishes a death notice (or any JSON) on a local topic the way a real publisher would. */
  publish(topic: string, json: unknown, attributes: Record<string, string>, orderingKey?: string): Promise<string>;
  stop(): Promise<void>;
}

export async function startStack(o: StackOptions = {}): Promise<Stack> {
  const env = o.env ?? process.env;
  const logger = o.logger ?? consoleLogger({ component: 'stack' });
  const stoppers: Array<{ name: string; fn: () => Promise<void> }> = [];
  // Once: a signal handler and a failing start can both ask, and a second pass must not run the
  // stoppers again (or reverse the list under the first).
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      for (const s of stoppers.reverse()) {
        await s.fn().catch((err: unknown) => logger.warn(`stopping ${s.name} failed`, { err }));
      }
      stoppers.length = 0;
    })());
  const signal = o.signal;
  const progress = o.onProgress ?? (() => {});
  // Between steps: each part is registered for stopping before this runs, so an abort stops it too.
  const checkpoint = () => signal?.throwIfAborted();

  try {
    const applicationName = env.DBOS_APPLICATION_NAME || DEFAULT_LOCAL_APP;
    const project = env.GOOGLE_CLOUD_PROJECT || LOCAL_PROJECT;
    const deathTopic = env.EXECUTOR_DEATH_TOPIC || 'executor-deaths';
    const deadLetterTopic = `${deathTopic}-dead-letter`;
    const dbosSchema = env.DBOS_SYSTEM_SCHEMA || 'dbos';
    const afterlifeSchema = env.AFTERLIFE_SCHEMA || 'afterlife';

    checkpoint();
    if (env.DATABASE_URL) progress('postgres: DATABASE_URL, migrating');
    const postgres = await startPostgres({
      databaseUrl: env.DATABASE_URL || undefined,
      dbosSchema,
      afterlifeSchema,
      onProgress: progress,
      ...(signal ? { signal } : {}),
    });
    stoppers.push({ name: 'postgres', fn: postgres.stop });
    checkpoint();
    if (!env.REDIS_URL) progress('redis: starting a local redis-server if one is installed');
    const redis = await startRedis({ redisUrl: env.REDIS_URL || undefined, ...(signal ? { signal } : {}) });
    stoppers.push({ name: 'redis', fn: redis.stop });
    checkpoint();
    if (redis.kind === 'none') logger.warn(`${redis.reason}: running DEGRADED (no locks, no heartbeats, the reaper declares nothing dead)`);

    const bin = (o.forceBridge ?? env.LOCAL_PUBSUB === 'bridge') ? undefined : emulatorBinary(env);
    let emulator: StackEmulator | undefined;
    let memory: MemoryBridge | undefined;
    if (bin) {
      progress(`pub/sub: starting the emulator (${bin})`);
      emulator = await startEmulator(bin, signal);
      stoppers.push({ name: 'pubsub emulator', fn: emulator.stop });
    } else {
      memory = await startMemoryBridge({ project, logger });
      stoppers.push({ name: 'in-process bridge', fn: memory.close });
    }
    checkpoint();

    const fnEnv: Record<string, string> = {
      ...definedOnly(env),
      DATABASE_URL: postgres.url,
      DBOS_APPLICATION_NAME: applicationName,
      DBOS_SYSTEM_SCHEMA: dbosSchema,
      AFTERLIFE_SCHEMA: afterlifeSchema,
      GOOGLE_CLOUD_PROJECT: project,
      EXECUTOR_DEATH_TOPIC: deathTopic,
      METADATA_SERVER_DETECTION: 'none',
    };
    if (redis.url) fnEnv.REDIS_URL = redis.url;
    else delete fnEnv.REDIS_URL;
    if (emulator) fnEnv.PUBSUB_EMULATOR_HOST = emulator.host;
    if (memory) fnEnv.PUBSUB_BRIDGE_URL = memory.url;

    const functions: ServedFunction[] = [];
    for (const target of registeredTargets()) {
      const served = await serveFunction(target, fnEnv, o.onFunctionLine ? (line) => o.onFunctionLine?.(target, line) : undefined, {
        onSpawn: (port) => progress(`function ${target}: starting functions-framework on 127.0.0.1:${port}`),
        ...(signal ? { signal } : {}),
      });
      stoppers.push({ name: `function ${target}`, fn: () => served.proc.stop() });
      functions.push(served);
      checkpoint();
    }
    const deathFn = functions.find((f) => f.target === 'executorDeath');
    if (!deathFn) throw new Error('the build registers no executorDeath target; run `npm run build`');

    let publish: Stack['publish'];
    if (emulator) {
      // No credentials locally: without this google-auth-library probes the GCE metadata server and warns.
      process.env.METADATA_SERVER_DETECTION ??= 'none';
      const { PubSub } = await import('@google-cloud/pubsub');
      const pubsub: PubSub = new PubSub({ projectId: project, apiEndpoint: emulator.host });
      stoppers.push({ name: 'pubsub client', fn: () => pubsub.close() });
      const bridge: Bridge = await startPullBridge({
        pubsub,
        topic: deathTopic,
        subscription: LOCAL_SUBSCRIPTION,
        targetUrl: deathFn.url,
        logger,
        deadLetterTopic,
        maxDeliveryAttempts: 5,
      });
      stoppers.push({ name: 'bridge', fn: bridge.close });
      checkpoint();
      publish = async (topic, json, attributes, orderingKey) =>
        pubsub.topic(topic, { messageOrdering: true }).publishMessage({ json, attributes, ...(orderingKey ? { orderingKey } : {}) });
    } else if (memory) {
      const m = memory;
      m.subscribe(deathTopic, LOCAL_SUBSCRIPTION, deathFn.url, { deadLetterTopic, maxDeliveryAttempts: 5 });
      publish = async (topic, json, attributes, orderingKey) => m.publish(topic, json, attributes, orderingKey);
    } else {
      throw new Error('unreachable: no Pub/Sub');
    }

    const reaper = functions.find((f) => f.target === 'reaper');
    let scheduler: Scheduler | undefined;
    if (reaper) {
      // As Terraform's attempt_deadline: the whole invocation (it ticks until its budget ends) plus slack.
      const timeoutMs = (Number(env.FUNCTION_TIMEOUT_S || 60) + 30) * 1_000;
      scheduler = startScheduler({ url: reaper.url, everyMs: o.scheduleMs ?? Number(env.LOCAL_SCHEDULE_MS || 10_000), logger, timeoutMs });
      const s = scheduler;
      stoppers.push({ name: 'scheduler', fn: () => s.stop() });
    }
    checkpoint();

    return {
      applicationName,
      applicationNameDefaulted: !env.DBOS_APPLICATION_NAME,
      project,
      deathTopic,
      deadLetterTopic,
      postgres,
      redis,
      pubsub: emulator
        ? { kind: 'emulator', host: emulator.host }
        : {
            kind: 'bridge',
            url: memory?.url ?? '',
            reason: bin === undefined && env.LOCAL_PUBSUB === 'bridge' ? 'LOCAL_PUBSUB=bridge' : `no Pub/Sub emulator at ${env.PUBSUB_EMULATOR_BIN || DEFAULT_EMULATOR_BIN}`,
          },
      functions,
      scheduler,
      env: fnEnv,
      publish,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

function definedOnly(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  return out;
}
