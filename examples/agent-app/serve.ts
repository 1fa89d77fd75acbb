import * as ff from '@google-cloud/functions-framework';
import { z } from 'zod';
import { startAgent } from './main.js';

/**
 * The same app served as an HTTP function through functions-framework (acceptance B):
 *
 *   functions-framework --source=dist/examples/agent-app/serve.js --target=agent
 *
 * functions-framework exits the process synchronously on SIGTERM; the kit's listener, prepended to the
 * framework's, runs first and holds that exit until the drain is done (serveLate.ts attaches it later).
 */
const StartBody = z.object({
  workflowId: z.string().min(1).max(200),
  spec: z.object({ steps: z.number().int().min(1).max(100), stepMs: z.number().int().min(0).max(600_000), tag: z.string().optional() }),
  queueName: z.string().min(1).optional(),
});

ff.http('agent', async (req: ff.Request, res: ff.Response) => {
  if (req.method !== 'POST') {
    res.status(405).send('POST only');
    return;
  }
  const body = StartBody.safeParse(req.body);
  if (!body.success) {
    res.status(400).json({ error: 'bad request', issues: body.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`) });
    return;
  }
  try {
    await startAgent(body.data.workflowId, body.data.spec, body.data.queueName);
    res.status(202).json({ workflowId: body.data.workflowId });
  } catch (err) {
    res.status(503).json({ error: err instanceof Error ? err.message : String(err) });
  }
});
