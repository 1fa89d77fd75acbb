import { DBOS } from '@dbos-inc/dbos-sdk';
import { agentWorkflow, ensureStepTable, useAppDatabase, type AgentSpec } from './workflows.js';
import './divergent.js';

/**
 * A DBOS app as teams run it on Cloud Run: configured from the environment, launched once. The tests
 * start it as a child process (real DBOS, real signals) and drive it over the IPC channel.
 *
 *   DBOS_SYSTEM_DATABASE_URL  system database      DBOS_APP_NAME     application name
 *   DBOS__VMID                executor ID           DBOS__APPVERSION  application version
 *   AGENT_QUEUES              JSON {name: {concurrency?, workerConcurrency?}}
 */
const systemDatabaseUrl = required('DBOS_SYSTEM_DATABASE_URL');
const name = required('DBOS_APP_NAME');

DBOS.setConfig({
  name,
  systemDatabaseUrl,
  systemDatabasePoolSize: 6,
  logLevel: process.env.DBOS_LOG_LEVEL ?? 'warn',
  runMigrations: process.env.DBOS_RUN_MIGRATIONS !== 'false',
});
useAppDatabase(systemDatabaseUrl);
await ensureStepTable();
await DBOS.launch();
const queues = JSON.parse(process.env.AGENT_QUEUES ?? '{}') as Record<string, { concurrency?: number; workerConcurrency?: number }>;
for (const [queueName, opts] of Object.entries(queues)) await DBOS.registerQueue(queueName, opts);

type Command = { id: number; cmd: 'start'; workflowId: string; spec: AgentSpec; queueName?: string };

process.on('message', (raw) => {
  const msg = raw as Command;
  void (async () => {
    try {
      if (msg.cmd === 'start') {
        await DBOS.startWorkflow(agentWorkflow, {
          workflowID: msg.workflowId,
          ...(msg.queueName ? { queueName: msg.queueName } : {}),
        })(msg.spec);
        process.send?.({ id: msg.id, ok: true });
      }
    } catch (err) {
      process.send?.({ id: msg.id, ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  })();
});

process.send?.({ event: 'ready', executorId: DBOS.executorID, applicationVersion: DBOS.applicationVersion });

function required(key: string): string {
  const v = process.env[key];
  if (!v) throw new Error(`${key} is required`);
  return v;
}
