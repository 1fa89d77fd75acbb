import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { AgentSpec } from '../../examples/agent-app/workflows.js';

/**
 * A real DBOS executor (the example agent app, compiled) in a child process: killed with real signals,
 * driven over IPC. `npm test` builds first, so dist/ is current.
 */
export const AGENT_APP = fileURLToPath(new URL('../../dist/examples/agent-app/main.js', import.meta.url));

export interface ExecutorOptions {
  databaseUrl: string;
  applicationName: string;
  applicationVersion: string;
  executorId: string;
  queues?: Record<string, { concurrency?: number; workerConcurrency?: number }>;
  env?: Record<string, string>;
  /** Defaults to the example agent app. */
  script?: string;
}

export interface ExecutorHandle {
  executorId: string;
  child: ChildProcess;
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  start(workflowId: string, spec: AgentSpec, queueName?: string): Promise<void>;
  kill(signal: NodeJS.Signals): void;
  /** SIGKILL if still running; safe to call twice. */
  stop(): Promise<void>;
}

export async function startExecutor(o: ExecutorOptions): Promise<ExecutorHandle> {
  const output: string[] = [];
  const child = fork(o.script ?? AGENT_APP, [], {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: {
      ...process.env,
      DBOS_SYSTEM_DATABASE_URL: o.databaseUrl,
      DBOS_APP_NAME: o.applicationName,
      DBOS__APPVERSION: o.applicationVersion,
      DBOS__VMID: o.executorId,
      AGENT_QUEUES: JSON.stringify(o.queues ?? {}),
      DBOS_RUN_MIGRATIONS: 'false',
      METADATA_SERVER_DETECTION: 'none',
      ...o.env,
    },
  });
  child.stdout?.on('data', (b: Buffer) => output.push(b.toString()));
  child.stderr?.on('data', (b: Buffer) => output.push(b.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let nextId = 1;
  const pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`executor ${o.executorId} not ready in 30 s:\n${output.join('')}`)), 30_000);
    child.on('message', (raw) => {
      const m = raw as { event?: string; id?: number; ok?: boolean; error?: string };
      if (m.event === 'ready') {
        clearTimeout(timer);
        resolve();
      } else if (m.id !== undefined) {
        const p = pending.get(m.id);
        pending.delete(m.id);
        if (m.ok) p?.resolve();
        else p?.reject(new Error(m.error ?? 'command failed'));
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`executor ${o.executorId} exited (${code ?? signal}) before ready:\n${output.join('')}`));
      for (const p of pending.values()) p.reject(new Error('executor exited'));
    });
  });
  await ready;
  return {
    executorId: o.executorId,
    child,
    output,
    exited,
    start: (workflowId, spec, queueName) =>
      new Promise<void>((resolve, reject) => {
        const id = nextId++;
        pending.set(id, { resolve, reject });
        child.send({ id, cmd: 'start', workflowId, spec, ...(queueName ? { queueName } : {}) });
      }),
    kill: (signal) => {
      child.kill(signal);
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
