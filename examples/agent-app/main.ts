/**
 * A DBOS app as teams run it on Cloud Run: configured from the environment, launched once. The tests
 * start it as a child process (real DBOS, real signals) and drive it over the IPC channel; `serve.ts`
 * serves the same app through functions-framework.
 *
 *   DBOS_SYSTEM_DATABASE_URL  system database      DBOS_APP_NAME     application name
 *   DBOS__VMID                executor ID           DBOS__APPVERSION  application version
 *   AGENT_QUEUES              JSON {name: {concurrency?, workerConcurrency?}}
 *   AFTERLIFE_KIT             `on` / `off`; by default the kit is attached when REDIS_URL is set
 */
// --- README: installing the executor kit (begin) ---
import { DBOS } from '@dbos-inc/dbos-sdk';
import { attachExecutor, cloudRunExecutorId, type ExecutorKit } from 'afterlife-plane/executor';
import { agentWorkflow, ensureStepTable, useAppDatabase, type AgentSpec } from './workflows.js';

function required(key: string): string {
  const v = process.env[key];
  if (!v) throw new Error(`${key} is required`);
  return v;
}

const systemDatabaseUrl = required('DBOS_SYSTEM_DATABASE_URL');
const name = required('DBOS_APP_NAME');
// This example also runs bare for other test suites; your app would simply always attach.
const kitEnabled = process.env.AFTERLIFE_KIT === 'on' || (process.env.AFTERLIFE_KIT !== 'off' && !!process.env.REDIS_URL);

// A unique executor ID per process: DBOS__VMID when set (DBOS reads it), else on Cloud Run one derived from
// the instance ID and K_REVISION.
const executorID = process.env.DBOS__VMID ? undefined : await cloudRunExecutorId();

DBOS.setConfig({
  name,
  ...(executorID ? { executorID } : {}),
  systemDatabaseUrl,
  systemDatabasePoolSize: 6,
  logLevel: process.env.DBOS_LOG_LEVEL ?? 'warn',
  runMigrations: process.env.DBOS_RUN_MIGRATIONS !== 'false',
});
useAppDatabase(systemDatabaseUrl);
await ensureStepTable();
await DBOS.launch();
const queues = JSON.parse(process.env.AGENT_QUEUES ?? '{}') as Record<string, Parameters<typeof DBOS.registerQueue>[1]>;
for (const [queueName, opts] of Object.entries(queues)) await DBOS.registerQueue(queueName, opts);

// After launch: heartbeat, SIGTERM drain, drain requests, death notice. The database, the app's name, the
// executor ID and the version come from DBOS's configuration; the rest from the environment (REDIS_URL,
// GOOGLE_CLOUD_PROJECT, EXECUTOR_DEATH_TOPIC, …). A failed attach exits the process (pass fatal: false to handle it).
export const kit: ExecutorKit | undefined = kitEnabled ? await attachExecutor() : undefined;

/** Intake goes through here: once the kit is draining, new work belongs to another executor. */
export async function startAgent(workflowId: string, spec: AgentSpec, queueName?: string): Promise<void> {
  if (kit?.draining) throw new Error('draining: retry on another instance');
  await DBOS.startWorkflow(agentWorkflow, { workflowID: workflowId, ...(queueName ? { queueName } : {}) })(spec);
}
// --- README: installing the executor kit (end) ---

// Test-only workflows that replay differently (the fork suites); imports are hoisted, so they register before launch.
import './divergent.js';
import './transactional.js';
import './family.js';

type Command = { id: number; cmd: 'start'; workflowId: string; spec: AgentSpec; queueName?: string };

process.on('message', (raw) => {
  const msg = raw as Command;
  void (async () => {
    try {
      if (msg.cmd === 'start') {
        await startAgent(msg.workflowId, msg.spec, msg.queueName);
        process.send?.({ id: msg.id, ok: true });
      }
    } catch (err) {
      process.send?.({ id: msg.id, ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  })();
});

process.send?.({ event: 'ready', executorId: DBOS.executorID, applicationVersion: DBOS.applicationVersion, kit: kit !== undefined });
