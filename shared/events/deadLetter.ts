import { z } from 'zod';
import type { Publisher } from '../../packages/executor/src/plane/index.js';

/**
 * A lineage that exhausted its forks (topic `workflow-dead-letters`, JSON). One message per root workflow;
 * attributes `type` and `rootWorkflowId`, ordering key the root. Consumers page a human: the workflow keeps
 * diverging however often it is forked.
 */
export const WorkflowDeadLetter = z.object({
  type: z.literal('workflow.dead-letter'),
  version: z.literal(1),
  applicationName: z.string().min(1).max(512),
  rootWorkflowId: z.string().min(1),
  workflowId: z.string().min(1),
  forks: z.number().int().min(0),
  reason: z.string().min(1),
  error: z.string().optional(),
  deadAt: z.iso.datetime({ offset: true }),
});
export type WorkflowDeadLetter = z.infer<typeof WorkflowDeadLetter>;

export async function publishDeadLetter(
  publisher: Publisher,
  topic: string,
  letter: Omit<WorkflowDeadLetter, 'type' | 'version'>,
): Promise<string> {
  const valid = WorkflowDeadLetter.parse({ type: 'workflow.dead-letter', version: 1, ...letter });
  return publisher.publish(topic, valid, { type: valid.type, rootWorkflowId: valid.rootWorkflowId }, valid.rootWorkflowId);
}
