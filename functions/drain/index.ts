import * as ff from '@google-cloud/functions-framework';
import { runtimeOr503 } from '../runtime.js';
import { installJsonFinalHandler } from '../transport.js';
import { handleDrainRequest } from './handle.js';

installJsonFinalHandler();

/** Registration only: POST writes drain requests, GET reports progress (see shared/drain). */
ff.http('drain', async (req: ff.Request, res: ff.Response) => {
  const rt = await runtimeOr503(res, { written: false });
  if (!rt) return;
  const out = await handleDrainRequest(rt, { method: req.method, body: req.body, query: req.query, headers: req.headers });
  res.status(out.status).json(out.body);
});
