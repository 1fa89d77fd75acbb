/**
 * `afterlife-plane/executor` (and `afterlife-executor`): the kit a DBOS app installs. See the README section "Installing the executor kit in
 * your DBOS app".
 * @module
 */

export { ATTACH_FAILED_EXIT_CODE, attachExecutor, ExecutorIdError, type ExecutorKit } from './attach.js';
export { type ExecutorKitOptions, type KitState } from './options.js';
export { type WatchStatus } from './watch.js';
export { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TTL_MS } from './heartbeat.js';
export { CLOUD_RUN_GRACE_MS, DEFAULT_HANDOVER_RESERVE_MS, DEFAULT_SHUTDOWN_MARGIN_MS } from './timeouts.js';
export { FENCED_EXIT_CODE } from './fence.js';
export { CallBudgetExhaustedError, limitCalls, type CallLimiter, type LimitOptions } from './limiter.js';
export { executorOptionsFromEnv } from './env.js';
export { createKitPublisher, type PublishPath } from './publishPath.js';
export { cloudRunExecutorId, type CloudRunExecutorIdOptions, EXECUTOR_ID_MAX, executorIdFor, ExecutorIdMetadataError } from './cloudRun.js';
