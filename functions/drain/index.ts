import * as ff from '@google-cloud/functions-framework';
import { getRuntime } from '../runtime.js';
import { handleDrainRequest } from './handle.js';

/** Registration only: POST writes drain requests, GET reports progress (see shared/drain). */
ff.http('drain', async (req: ff.Request, res: ff.Response) => {
  const rt = await getRuntime();
  const out = await handleDrainRequest(rt, { method: req.method, body: req.body, query: req.query, headers: req.headers });
  res.status(out.status).json(out.body);
});
