import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import type { AgentSpec } from '../../examples/agent-app/workflows.js';
import { ROOT } from './functions.js';

/**
 * A real DBOS executor — the example agent app (dist/examples/agent-app/main.js) — in a child process,
 * driven over IPC and stopped with real signals. The demo's executors; the tests' helper has the same shape.
 */
export const AGENT_APP = join(ROOT, 'dist/examples/agent-app/main.js');

export interface AgentExecutor {
  executorId: string;
  /** Whether the app attached afterlife's executor kit (heartbeat, SIGTERM drain, death notice). */
  kit: boolean;
  child: ChildProcess;
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  start(workflowId: string, spec: AgentSpec, queueName?: string): Promise<void>;
  stop(): Promise<void>;
}

export async function startAgentExecutor(o: {
  databaseUrl: string;
  applicationName: string;
  applicationVersion: string;
  executorId: string;
  env?: Record<string, string>;
  readyTimeoutMs?: number;
}): Promise<AgentExecutor> {
  const output: string[] = [];
  const child = fork(AGENT_APP, [], {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: {
      ...process.env,
      ...o.env,
      DBOS_SYSTEM_DATABASE_URL: o.databaseUrl,
      DBOS_APP_NAME: o.applicationName,
      DBOS__APPVERSION: o.applicationVersion,
      DBOS__VMID: o.executorId,
      // The stack migrated DBOS's schema once; concurrent launches migrating a fresh database race.
      DBOS_RUN_MIGRATIONS: 'false',
      METADATA_SERVER_DETECTION: 'none',
    },
  });
  const keep = (b: Buffer) => {
    output.push(b.toString());
    if (output.length > 200) output.shift();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let nextId = 1;
  const pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  const timeoutMs = o.readyTimeoutMs ?? 30_000;
  const kit = await new Promise<boolean>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`executor ${o.executorId} not ready in ${timeoutMs} ms:\n${output.join('')}`)), timeoutMs);
    child.on('message', (raw) => {
      const m = raw as { event?: string; kit?: boolean; id?: number; ok?: boolean; error?: string };
      if (m.event === 'ready') {
        clearTimeout(timer);
        resolve(m.kit === true);
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
  return {
    executorId: o.executorId,
    kit,
    child,
    output,
    exited,
    start: (workflowId, spec, queueName) =>
      new Promise<void>((resolve, reject) => {
        const id = nextId++;
        pending.set(id, { resolve, reject });
        child.send({ id, cmd: 'start', workflowId, spec, ...(queueName ? { queueName } : {}) });
      }),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
