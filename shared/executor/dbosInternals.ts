import { DBOS } from '@dbos-inc/dbos-sdk';

/**
 * The little the kit needs from a launched DBOS app. Identity and shutdown use the public API; the count of
 * workflows running in this process comes from DBOS internals (`runningWorkflowMap`, the map
 * `DBOS.shutdown` drains), reached through the package's `internal/*` export and guarded: if a DBOS release
 * moves it, `runningCount()` returns undefined and the kit falls back to counting PENDING rows in Postgres.
 */
export interface DbosApp {
  executorId: string;
  applicationVersion: string;
  applicationName: string | undefined;
  runningCount(): number | undefined;
  /** Stops dequeues, waits up to `budgetMs` for running workflows, then disconnects DBOS. Memoized. */
  shutdown(budgetMs: number): Promise<void>;
}

interface ExecutorLike {
  appName?: string;
  systemDatabase?: { runningWorkflowMap?: Map<string, unknown> };
}

export async function dbosApp(): Promise<DbosApp> {
  if (!DBOS.isInitialized()) throw new Error('attachExecutor: call DBOS.launch() first');
  let executor: ExecutorLike | undefined;
  try {
    const mod = (await import('@dbos-inc/dbos-sdk/internal/dbos-executor')) as { DBOSExecutor?: { globalInstance?: ExecutorLike } };
    executor = mod.DBOSExecutor?.globalInstance;
  } catch {
    executor = undefined;
  }
  // Captured now: DBOS.shutdown() clears the global, and the in-flight count is wanted during the drain.
  const running = executor?.systemDatabase?.runningWorkflowMap;
  let stopping: Promise<void> | undefined;
  return {
    executorId: DBOS.executorID,
    applicationVersion: DBOS.applicationVersion,
    applicationName: typeof executor?.appName === 'string' ? executor.appName : undefined,
    runningCount: () => (running instanceof Map ? running.size : undefined),
    shutdown: (budgetMs) => {
      // DBOS rejects a timeout above 2^31-1 ms before tearing anything down.
      stopping ??= DBOS.shutdown({ workflowCompletionTimeoutMS: Math.max(0, Math.min(budgetMs, 2_147_483_647)) });
      return stopping;
    },
  };
}
