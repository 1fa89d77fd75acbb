import { type AgentExecutor, type AgentExecutorOptions, AGENT_APP, startAgentExecutor } from '../../scripts/stack/executor.js';

/**
 * A real DBOS executor (the example agent app, compiled) in a child process: killed with real signals,
 * driven over IPC. `npm test` builds first, so dist/ is current. The implementation is shared with
 * `npm run demo` (scripts/stack/executor.ts).
 */
export { AGENT_APP };
export type ExecutorOptions = AgentExecutorOptions;
export type ExecutorHandle = AgentExecutor;

export function startExecutor(o: ExecutorOptions): Promise<ExecutorHandle> {
  return startAgentExecutor(o);
}
