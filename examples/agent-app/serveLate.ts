import * as ff from '@google-cloud/functions-framework';
import { attachExecutor, executorOptionsFromEnv, type ExecutorKit } from 'afterlife-plane/executor';
import { z } from 'zod';
import { startAgent } from './main.js';

/**
 * Test variant of serve.ts: the kit is attached on the first request, i.e. after functions-framework
 * registered its own SIGTERM listener (it does so once listening), which exits the process at once. Run
 * with AFTERLIFE_KIT=off so that main.ts does not attach while loading. The kit's listener is prepended,
 * so it still runs first and holds that exit until the drain is done.
 */
let kit: Promise<ExecutorKit> | undefined;
const StartBody = z.object({
  workflowId: z.string().min(1).max(200),
  spec: z.object({ steps: z.number().int().min(1).max(100), stepMs: z.number().int().min(0).max(600_000) }),
});

ff.http('agentLate', async (req: ff.Request, res: ff.Response) => {
  kit ??= attachExecutor(executorOptionsFromEnv(process.env));
  const attached = await kit;
  if (req.method !== 'POST') {
    res.status(200).json({ executorId: attached.executorId, state: attached.state });
    return;
  }
  const body = StartBody.safeParse(req.body);
  if (attached.draining || !body.success) {
    res.status(attached.draining ? 503 : 400).json({ error: attached.draining ? 'draining' : 'bad request' });
    return;
  }
  await startAgent(body.data.workflowId, body.data.spec);
  res.status(202).json({ workflowId: body.data.workflowId });
});
