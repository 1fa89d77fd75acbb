import * as ff from '@google-cloud/functions-framework';
import { runtimeOr503 } from '../runtime.js';
import { installJsonFinalHandler } from '../transport.js';
import { handleReaperRequest } from './handle.js';

installJsonFinalHandler();

/** Registration only: Cloud Scheduler (OIDC) POSTs here every minute. */
ff.http('reaper', async (req, res) => {
  const rt = await runtimeOr503(res);
  if (!rt) return;
  const answer = await handleReaperRequest(rt, {
    method: req.method,
    query: req.query as Record<string, unknown>,
    body: req.body,
    headers: req.headers,
  });
  res.status(answer.status).json(answer.body);
});
