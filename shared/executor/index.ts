/**
 * `afterlife/executor`: the kit a DBOS app installs. See the README section "Installing the executor kit in
 * your DBOS app".
 */
export {
  attachExecutor,
  CLOUD_RUN_GRACE_MS,
  DEFAULT_HANDOVER_RESERVE_MS,
  DEFAULT_HEARTBEAT_TTL_MS,
  DEFAULT_SHUTDOWN_MARGIN_MS,
  ExecutorIdError,
  type ExecutorKit,
  type ExecutorKitOptions,
  type KitState,
} from './attach.js';
export { CallBudgetExhaustedError, limitCalls, type CallLimiter, type LimitOptions } from './limiter.js';
export { executorOptionsFromEnv } from './env.js';
export { cloudRunExecutorId, type CloudRunExecutorIdOptions, EXECUTOR_ID_MAX, executorIdFor, ExecutorIdMetadataError } from './cloudRun.js';
