'use strict';
const { DBOS } = require('@dbos-inc/dbos-sdk');

/** The queue and the workflow the producer enqueues by name; the workers register both. */
const QUEUE = 'tasks';
const WORKFLOW = 'taskWorkflow';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function registerTasks() {
  return DBOS.registerWorkflow(
    async function taskWorkflow(spec) {
      const done = [];
      for (let i = 1; i <= spec.steps; i++) {
        done.push(
          await DBOS.runStep(
            async () => {
              await sleep(spec.stepMs);
              return `${DBOS.executorID}:${i}`;
            },
            { name: `step-${i}` },
          ),
        );
      }
      return done;
    },
    { name: WORKFLOW },
  );
}

module.exports = { QUEUE, WORKFLOW, registerTasks };
