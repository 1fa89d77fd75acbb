import { dirname, join } from 'node:path';
import type { DBOS as DBOSClass } from '@dbos-inc/dbos-sdk';
import { ownRequire } from './ownRequire.js';

/**
 * The little the kit needs from a launched DBOS app. Identity and shutdown use the public API. The launched
 * configuration (system database URL and schema, application name) and the workflows running in this
 * process (`runningWorkflowMap`, the map `DBOS.shutdown` drains: its size, and its IDs for the superseded
 * sweep) come from DBOS internals: the
 * executor's module, loaded by file path next to the package's entry point (5.2.11 has no `internal/*`
 * export; a CommonJS module is one instance per file path, so this is the instance the app launched). All of
 * it guarded: if a DBOS release moves it, the kit falls back to counting PENDING rows in Postgres and asks
 * for the configuration it could not read.
 *
 * Which DBOS: the copy the app launched, found among the loaded ones — not whatever `@dbos-inc/dbos-sdk`
 * resolves to from the kit's own directory. Installed from a tarball or the registry they are the same
 * (a peer dependency); linked from a checkout (`npm install <dir>`) the kit would otherwise load the
 * checkout's copy, never launched, and refuse with "call DBOS.launch() first".
 */
export interface DbosApp {
  executorId: string;
  applicationVersion: string;
  applicationName: string | undefined;
  /** What the app gave `DBOS.setConfig`, as DBOS launched with it (undefined: not readable in this release). */
  config: { systemDatabaseUrl: string | undefined; systemDatabaseSchemaName: string | undefined; ownPool: boolean } | undefined;
  runningCount(): number | undefined;
  /** IDs of the workflows this process is running now (undefined: not readable in this release). */
  runningIds(): ReadonlySet<string> | undefined;
  /** Stops dequeues, waits up to `budgetMs` for running workflows, then disconnects DBOS. Memoized. */
  shutdown(budgetMs: number): Promise<void>;
}

interface ExecutorLike {
  appName?: string;
  config?: { systemDatabaseUrl?: unknown; systemDatabaseSchemaName?: unknown; systemDatabasePool?: unknown };
  systemDatabase?: { runningWorkflowMap?: Map<string, unknown> };
}

type ExecutorModule = { DBOSExecutor?: { globalInstance?: ExecutorLike } };

type Dbos = typeof DBOSClass;
const SDK_ENTRY = /[\\/]@dbos-inc[\\/]dbos-sdk[\\/]dist[\\/]src[\\/]index\.js$/;

/** The loaded SDK copies (ESM imports of this CommonJS package land in the same cache), launched first. */
export function loadedDbos(): { entry: string; DBOS: Dbos }[] {
  const found: { entry: string; DBOS: Dbos }[] = [];
  for (const [entry, mod] of Object.entries(ownRequire.cache)) {
    const DBOS = (mod?.exports as { DBOS?: Dbos } | undefined)?.DBOS;
    if (SDK_ENTRY.test(entry) && typeof DBOS?.isInitialized === 'function') found.push({ entry, DBOS });
  }
  return found.sort((a, b) => Number(b.DBOS.isInitialized()) - Number(a.DBOS.isInitialized()));
}

/** The SDK copy the app launched, if any. */
function launchedCopy(): { entry: string; DBOS: Dbos } | undefined {
  return loadedDbos().find((c) => c.DBOS.isInitialized());
}

function launchedDbos(): { entry: string; DBOS: Dbos } {
  const launched = launchedCopy();
  if (launched) return launched;
  // Nothing launched yet (or loaded outside the cache): the kit's own resolution, for the error below.
  const entry = ownRequire.resolve('@dbos-inc/dbos-sdk');
  return { entry, DBOS: (ownRequire(entry) as { DBOS: Dbos }).DBOS };
}

function dbosExecutorModule(entry: string): ExecutorModule | undefined {
  return dbosModule(entry, 'dbos-executor.js') as ExecutorModule | undefined;
}

function executorOf(entry: string): ExecutorLike | undefined {
  return dbosExecutorModule(entry)?.DBOSExecutor?.globalInstance;
}

/** One module of an SDK copy, by its file next to the entry point (undefined when a release moved it). */
function dbosModule(entry: string, file: string): unknown {
  try {
    return ownRequire(join(dirname(entry), file));
  } catch {
    return undefined;
  }
}

/** A module of the copy the app launched, with its executor instance (undefined when none is launched). */
export function launchedDbosModule(file: string): { module: unknown; executor: unknown } | undefined {
  const launched = launchedCopy();
  return launched ? { module: dbosModule(launched.entry, file), executor: executorOf(launched.entry) } : undefined;
}

/** DBOS's executor instance in the copy the app launched (undefined when none is, or a release moved it). */
export function launchedDbosExecutor(): unknown {
  const launched = launchedCopy();
  return launched ? executorOf(launched.entry) : undefined;
}

export async function dbosApp(): Promise<DbosApp> {
  const { entry, DBOS } = launchedDbos();
  if (!DBOS.isInitialized()) throw new Error('attachExecutor: call DBOS.launch() first');
  const executor = executorOf(entry);
  const cfg = executor?.config;
  // Captured now: DBOS.shutdown() clears the global, and the in-flight count is wanted during the drain.
  const running = executor?.systemDatabase?.runningWorkflowMap;
  let stopping: Promise<void> | undefined;
  return {
    executorId: DBOS.executorID,
    applicationVersion: DBOS.applicationVersion,
    applicationName: typeof executor?.appName === 'string' ? executor.appName : undefined,
    config: cfg
      ? {
          systemDatabaseUrl: typeof cfg.systemDatabaseUrl === 'string' ? cfg.systemDatabaseUrl : undefined,
          systemDatabaseSchemaName: typeof cfg.systemDatabaseSchemaName === 'string' ? cfg.systemDatabaseSchemaName : undefined,
          // With a pool of its own, DBOS's URL is a default it never connects to.
          ownPool: cfg.systemDatabasePool !== undefined && cfg.systemDatabasePool !== null,
        }
      : undefined,
    runningCount: () => (running instanceof Map ? running.size : undefined),
    runningIds: () => (running instanceof Map ? new Set(running.keys()) : undefined),
    shutdown: (budgetMs) => {
      // DBOS rejects a timeout above 2^31-1 ms before tearing anything down.
      stopping ??= DBOS.shutdown({ workflowCompletionTimeoutMS: Math.max(0, Math.min(budgetMs, 2_147_483_647)) });
      return stopping;
    },
  };
}
