import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { DBOS } from '@dbos-inc/dbos-sdk';

/**
 * The little the kit needs from a launched DBOS app. Identity and shutdown use the public API. The launched
 * configuration (system database URL and schema, application name) and the count of workflows running in
 * this process (`runningWorkflowMap`, the map `DBOS.shutdown` drains) come from DBOS internals: the
 * executor's module, loaded by file path next to the package's entry point (5.2.11 has no `internal/*`
 * export; a CommonJS module is one instance per file path, so this is the instance the app launched). All of
 * it guarded: if a DBOS release moves it, the kit falls back to counting PENDING rows in Postgres and asks
 * for the configuration it could not read.
 */
export interface DbosApp {
  executorId: string;
  applicationVersion: string;
  applicationName: string | undefined;
  /** What the app gave `DBOS.setConfig`, as DBOS launched with it (undefined: not readable in this release). */
  config: { systemDatabaseUrl: string | undefined; systemDatabaseSchemaName: string | undefined; ownPool: boolean } | undefined;
  runningCount(): number | undefined;
  /** Stops dequeues, waits up to `budgetMs` for running workflows, then disconnects DBOS. Memoized. */
  shutdown(budgetMs: number): Promise<void>;
}

interface ExecutorLike {
  appName?: string;
  config?: { systemDatabaseUrl?: unknown; systemDatabaseSchemaName?: unknown; systemDatabasePool?: unknown };
  systemDatabase?: { runningWorkflowMap?: Map<string, unknown> };
}

type ExecutorModule = { DBOSExecutor?: { globalInstance?: ExecutorLike } };

async function dbosExecutorModule(): Promise<ExecutorModule | undefined> {
  try {
    const require = createRequire(import.meta.url);
    return require(join(dirname(require.resolve('@dbos-inc/dbos-sdk')), 'dbos-executor.js')) as ExecutorModule;
  } catch {
    try {
      return (await import('@dbos-inc/dbos-sdk/internal/dbos-executor')) as ExecutorModule;
    } catch {
      return undefined;
    }
  }
}

export async function dbosApp(): Promise<DbosApp> {
  if (!DBOS.isInitialized()) throw new Error('attachExecutor: call DBOS.launch() first');
  const executor = (await dbosExecutorModule())?.DBOSExecutor?.globalInstance;
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
    shutdown: (budgetMs) => {
      // DBOS rejects a timeout above 2^31-1 ms before tearing anything down.
      stopping ??= DBOS.shutdown({ workflowCompletionTimeoutMS: Math.max(0, Math.min(budgetMs, 2_147_483_647)) });
      return stopping;
    },
  };
}
