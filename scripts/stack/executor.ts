import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import type { AgentSpec } from '../../examples/agent-app/workflows.js';
import { ROOT } from './functions.js';

/**
 * A real DBOS executor — the example agent app (dist/examples/agent-app/main.js) — in a child process,
 * driven over IPC and stopped with real signals. The demo's executors and the tests' (test/helpers/executor.ts).
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
  kill(signal: NodeJS.Signals): void;
  /** SIGKILL if still running; safe to call twice. */
  stop(): Promise<void>;
}

export interface AgentExecutorOptions {
  databaseUrl: string;
  applicationName: string;
  applicationVersion: string;
  executorId: string;
  queues?: Record<string, { concurrency?: number; workerConcurrency?: number; minPollingIntervalMs?: number }>;
  /** Applied last: overrides everything above. */
  env?: Record<string, string>;
  /** Defaults to the example agent app. */
  script?: string;
  readyTimeoutMs?: number;
  /** Aborted before the executor is ready (Ctrl-C in the demo): it is killed, and the start rejects. */
  signal?: AbortSignal;
}

export async function startAgentExecutor(o: AgentExecutorOptions): Promise<AgentExecutor> {
  o.signal?.throwIfAborted();
  const child = forkAgent(o);
  const output = keepOutput(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let nextId = 1;
  const pending: PendingCommands = new Map();
  const kit = await ready(o, child, output, exited, pending);
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
    kill: (signal) => {
      child.kill(signal);
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Commands sent over IPC and not answered yet, by id. */
type PendingCommands = Map<number, { resolve: () => void; reject: (e: Error) => void }>;

function forkAgent(o: AgentExecutorOptions): ChildProcess {
  return fork(o.script ?? AGENT_APP, [], {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: {
      ...process.env,
      DBOS_SYSTEM_DATABASE_URL: o.databaseUrl,
      DBOS_APP_NAME: o.applicationName,
      DBOS__APPVERSION: o.applicationVersion,
      DBOS__VMID: o.executorId,
      AGENT_QUEUES: JSON.stringify(o.queues ?? {}),
      // DBOS's schema is migrated once up front; concurrent launches migrating a fresh database race.
      DBOS_RUN_MIGRATIONS: 'false',
      METADATA_SERVER_DETECTION: 'none',
      ...o.env,
    },
  });
}

function keepOutput(child: ChildProcess): string[] {
  const output: string[] = [];
  const keep = (b: Buffer) => {
    output.push(b.toString());
    // Bounded for long demo runs; error messages show the tail.
    if (output.length > 5_000) output.shift();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return output;
}

/**
 * Resolves with whether the app attached the kit once it says it is ready; rejects when it exits first,
 * is not ready in time or the start is aborted. Also routes the replies to commands, for the handle's life.
 */
async function ready(
  o: AgentExecutorOptions,
  child: ChildProcess,
  output: string[],
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>,
  pending: PendingCommands,
): Promise<boolean> {
  const timeoutMs = o.readyTimeoutMs ?? 30_000;
  // Not ready (the bound, an abort): the caller gets no handle to stop it with, so it is killed here.
  const giveUp = (err: unknown) => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    return err;
  };
  let onAbort = () => {};
  return new Promise<boolean>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(giveUp(new Error(`executor ${o.executorId} not ready in ${timeoutMs} ms:\n${output.join('')}`))),
      timeoutMs,
    );
    onAbort = () => {
      clearTimeout(timer);
      reject(giveUp(o.signal?.reason));
    };
    o.signal?.addEventListener('abort', onAbort, { once: true });
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
  }).finally(() => o.signal?.removeEventListener('abort', onAbort));
}
