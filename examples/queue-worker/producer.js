'use strict';
// The producer: a separate process that enqueues through DBOSClient (an HTTP server in a real app). It runs
// no workflows, so it needs no kit: draining is the workers' business, and work it enqueues while a
// worker drains simply goes to another worker.
const { DBOSClient } = require('@dbos-inc/dbos-sdk');
const { QUEUE, WORKFLOW } = require('./tasks');

async function main() {
  const [count = '1', prefix = 'task', steps = '3', stepMs = '500'] = process.argv.slice(2);
  const client = await DBOSClient.create({
    systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL,
    applicationName: process.env.APP_NAME || 'queue-worker',
  });
  const ids = [];
  try {
    for (let i = 0; i < Number(count); i++) {
      const workflowID = `${prefix}-${i}`;
      await client.enqueue({ workflowName: WORKFLOW, queueName: QUEUE, workflowID }, { steps: Number(steps), stepMs: Number(stepMs) });
      ids.push(workflowID);
    }
  } finally {
    await client.destroy();
  }
  console.log(JSON.stringify({ event: 'enqueued', ids }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
