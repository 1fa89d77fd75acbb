import { installSignalHandlers, Lifecycle } from '../shared/lifecycle/shutdown.js';
import { consoleLogger } from '../shared/log.js';
import { createRuntime, lazyRuntime, type Runtime } from '../shared/runtime.js';

/**
 * The per-instance runtime shared by every registered function, and its SIGTERM handling. In production
 * it is built from process.env on first use; tests and the local stack hand in their own with `useRuntime`.
 */
export const lifecycle = new Lifecycle();
const lifecycleLog = consoleLogger({ component: 'afterlife-lifecycle' });
installSignalHandlers(lifecycle, 8_000, (m) => lifecycleLog.notice(m));

let factory: () => Promise<Runtime> = lazyRuntime(() => createRuntime({ lifecycle, publisher: 'pubsub' }));

export function getRuntime(): Promise<Runtime> {
  return factory();
}

export function useRuntime(rt: Runtime | (() => Promise<Runtime>)): void {
  factory = typeof rt === 'function' ? rt : () => Promise.resolve(rt);
}
