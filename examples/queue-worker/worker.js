'use strict';
// A worker: dequeues tasks. One per process (on Cloud Run: one per instance), each with a unique executor ID.
const { DBOS } = require('@dbos-inc/dbos-sdk');
const { attachExecutor } = require('afterlife-executor');
const { QUEUE, registerTasks } = require('./tasks');

async function main() {
  DBOS.setConfig({
    name: process.env.APP_NAME || 'queue-worker',
    systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL,
    // DBOS reads DBOS__VMID (executor ID) and DBOS__APPVERSION itself; on Cloud Run use cloudRunExecutorId().
    runMigrations: false,
    logLevel: process.env.DBOS_LOG_LEVEL || 'warn',
  });
  registerTasks();
  await DBOS.launch();
  await DBOS.registerQueue(QUEUE, { workerConcurrency: 4 });

  // The kit: database, app name, executor ID and version from DBOS; REDIS_URL etc. from the environment.
  // A worker has no intake to gate: on SIGTERM or a drain request the kit stops this process dequeuing,
  // and the queue's other workers take what is left. A failed attach exits the process (fatal by default).
  const kit = await attachExecutor();
  console.log(JSON.stringify({ event: 'worker_ready', executorId: kit.executorId, applicationVersion: kit.applicationVersion }));
}

void main();
