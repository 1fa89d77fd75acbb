import * as ff from '@google-cloud/functions-framework';
import { getRuntime } from '../runtime.js';
import { handleReaperRequest } from './handle.js';

/** Registration only: Cloud Scheduler (OIDC) POSTs here every minute. */
ff.http('reaper', async (req, res) => {
  let rt;
  try {
    rt = await getRuntime();
  } catch (err) {
    // No runtime (database unreachable at cold start): retryable, so Scheduler's retry policy applies.
    res.status(503).json({ error: err instanceof Error ? err.message : String(err) });
    return;
  }
  const answer = await handleReaperRequest(rt, { method: req.method, query: req.query as Record<string, unknown>, body: req.body, headers: req.headers });
  res.status(answer.status).json(answer.body);
});
