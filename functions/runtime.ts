import { errorMessage, installSignalHandlers, Lifecycle, type Logger, maskSecrets } from '../packages/executor/src/plane/index.js';
import { pinoConsoleLogger } from '../shared/log/pinoLogger.js';
import {
  createRuntime,
  lazyRuntime,
  type LazyRuntimeOptions,
  type Runtime,
  type RuntimeOptions,
  RuntimeUnavailableError,
  startFailureCode,
} from '../shared/runtime.js';

/**
 * The per-instance runtime shared by every registered function, and its SIGTERM handling. In production
 * it is built from process.env as the module loads (a cold instance's first delivery then finds the pool
 * and Redis already open instead of paying for them); tests and the local stack hand in their own with
 * `useRuntime`.
 */
export const lifecycle = new Lifecycle();
const lifecycleLog = pinoConsoleLogger({ component: 'afterlife-lifecycle' });
installSignalHandlers(lifecycle, 8_000, (m) => lifecycleLog.notice(m));

/** Before the runtime exists there is no configured logger; lines about the start itself use this one. */
const startLog = pinoConsoleLogger({ component: 'afterlife' });
let fallbackLog: Logger = startLog;
let built: Runtime | undefined;

/**
 * The production factory: built from `opts` (process.env by default), rebuilt with backoff after a failed
 * start, and one ERROR line per failed build. Tests use it with their own env to see what an instance does.
 */
export function startingRuntime(
  opts: RuntimeOptions = { lifecycle, publisher: 'pubsub' },
  backoff: Omit<LazyRuntimeOptions, 'onFailure'> = {},
  log: Logger = startLog,
): () => Promise<Runtime> {
  const build = async () => {
    const started = Date.now();
    const rt = await createRuntime(opts);
    rt.logger.info('afterlife runtime ready', { buildMs: Date.now() - started });
    return rt;
  };
  return lazyRuntime(build, {
    ...backoff,
    onFailure: (err, retryInMs, attempt) =>
      log.error('afterlife could not start; requests answer 503 (Pub/Sub: nack) until a rebuild succeeds', {
        event: 'runtime_start_failed',
        code: startFailureCode(err),
        err,
        attempt,
        retryInMs,
      }),
  });
}

let factory: () => Promise<Runtime> = startingRuntime();

// On Cloud Run (K_SERVICE) and under the local stack (which sets it too), start building now. Elsewhere
// (tests importing the handlers) nothing is opened until `useRuntime` or a first request.
if (process.env.K_SERVICE) void factory().catch(() => undefined);

export async function getRuntime(): Promise<Runtime> {
  const rt = await factory();
  built = rt;
  return rt;
}

/** The built runtime's logger, or the start logger while there is none (poison decoded before the build). */
export function currentLogger(): Logger {
  return built?.logger ?? fallbackLog;
}

/** `o.logger`: where lines go while that factory has built nothing (tests capture them). */
export function useRuntime(rt: Runtime | (() => Promise<Runtime>), o: { logger?: Logger } = {}): void {
  built = typeof rt === 'function' ? undefined : rt;
  fallbackLog = o.logger ?? startLog;
  factory = typeof rt === 'function' ? rt : () => Promise.resolve(rt);
}

/** The HTTP answer of a request that found no runtime: 503, with the reason and a code a caller can match. */
export function unavailableBody(err: unknown): { error: string; code: string } {
  if (err instanceof RuntimeUnavailableError) return { error: maskSecrets(err.message), code: err.code };
  return {
    error: maskSecrets(`afterlife could not start: ${errorMessage(err)}`),
    code: startFailureCode(err),
  };
}

/**
 * The runtime for a request, or undefined after answering 503 with why (the failed start itself was logged
 * once where the build failed, event runtime_start_failed). `extra` says more to the caller (drain: nothing written).
 */
export async function runtimeOr503(
  res: { status(code: number): { json(body: unknown): unknown } },
  extra: Record<string, unknown> = {},
): Promise<Runtime | undefined> {
  try {
    return await getRuntime();
  } catch (err) {
    res.status(503).json({ ...unavailableBody(err), ...extra });
    return undefined;
  }
}
