import { DBOS } from '@dbos-inc/dbos-sdk';
import { agentWorkflow, type AgentSpec } from './workflows.js';

/**
 * Test-only workflows for the retention suite (test/integration/retention): a parent and its child in
 * every combination of running and completed, and a workflow that leaves a row in each of DBOS's tables
 * (steps, input, output, events and their history, a stream). Started from outside with
 * `DBOSClient.enqueue` by workflow name.
 *
 *   familyWorkflow   starts agentWorkflow as a child (on `childQueue` when given, where nothing may run
 *                    it), awaits it or not, then holds for `holdMs` in a step
 *   chattyWorkflow   one step, two events (the second overwriting the first: events history), a stream
 */
export interface FamilySpec {
  child: AgentSpec;
  awaitChild: boolean;
  holdMs: number;
  childQueue?: string;
}

async function familyFn(spec: FamilySpec): Promise<string> {
  await DBOS.runStep(async () => 'prepared', { name: 'prepare' });
  const child = await DBOS.startWorkflow(agentWorkflow, spec.childQueue ? { queueName: spec.childQueue } : undefined)(spec.child);
  if (spec.awaitChild) await child.getResult();
  await DBOS.runStep(() => new Promise<void>((r) => setTimeout(r, spec.holdMs)), { name: 'hold' });
  return child.workflowID;
}
export const familyWorkflow = DBOS.registerWorkflow(familyFn, { name: 'familyWorkflow' });

async function chattyFn(tag: string): Promise<string> {
  await DBOS.setEvent('phase', 'started');
  const out = await DBOS.runStep(async () => `${tag}:answer`, { name: 'answer' });
  await DBOS.writeStream('tokens', out);
  await DBOS.setEvent('phase', 'done');
  return out;
}
export const chattyWorkflow = DBOS.registerWorkflow(chattyFn, { name: 'chattyWorkflow' });
