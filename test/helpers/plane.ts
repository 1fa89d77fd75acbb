import { PubSub } from '@google-cloud/pubsub';
import { useRuntime } from '../../functions/runtime.js';
import '../../functions/index.js';
import { startPullBridge, type Bridge } from '../../shared/events/bridge.js';
import { silentLogger } from '../../packages/executor/src/log.js';
import { serve } from './cloudEvents.js';
import { createTestDatabase, type TestDatabase } from './db.js';
import { type ExecutorHandle, type ExecutorOptions, startExecutor } from './executor.js';
import { testRuntime } from './runtime.js';

/**
 * One test file's recovery plane: its own database, a Runtime for the app, one served function target
 * and, with the emulator, a topic bridged to it. Executors started through it are stopped on close.
 */
export interface Plane {
  tdb: TestDatabase;
  rt: ReturnType<typeof testRuntime>;
  url: string;
  bridge: Bridge | undefined;
  start(o: Omit<ExecutorOptions, 'databaseUrl' | 'applicationName'>): Promise<ExecutorHandle>;
  close(): Promise<void>;
}

export async function startPlane(o: { app: string; target: string; topic?: string; emulatorHost?: string | null }): Promise<Plane> {
  const tdb = await createTestDatabase();
  const rt = testRuntime({ databaseUrl: tdb.url, applicationName: o.app });
  useRuntime(rt);
  const server = await serve(o.target);
  const pubsub = o.emulatorHost && o.topic ? new PubSub({ projectId: 'afterlife-test', apiEndpoint: o.emulatorHost }) : undefined;
  const bridge =
    pubsub && o.topic
      ? await startPullBridge({ pubsub, topic: o.topic, subscription: `${o.topic}-sub`, targetUrl: server.url, logger: silentLogger() })
      : undefined;
  const executors: ExecutorHandle[] = [];
  return {
    tdb,
    rt,
    url: server.url,
    bridge,
    start: async (e) => {
      const handle = await startExecutor({ databaseUrl: tdb.url, applicationName: o.app, ...e });
      executors.push(handle);
      return handle;
    },
    close: async () => {
      await Promise.all(executors.map((e) => e.stop()));
      await bridge?.close();
      await pubsub?.close();
      await server.close();
      await rt.close();
      await tdb.drop();
    },
  };
}
