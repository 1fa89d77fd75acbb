import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executorIdFor } from '../../../packages/executor/src/runtime/cloudRun.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor, workflowRows } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';

/**
 * examples/agent-app takes its executor ID from cloudRunExecutorId when it runs "on Cloud Run"
 * (K_REVISION set, no DBOS__VMID): a real DBOS executor, with a FAKE metadata server standing in for
 * Cloud Run's, which exists only inside Google Cloud.
 */
describe('the example app on Cloud Run', () => {
  let tdb: TestDatabase;
  let server: Server;
  let host: string;
  let exec: ExecutorHandle | undefined;
  const instanceId = `fake-instance-${Date.now()}`;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    server = createServer((req, res) => {
      if (req.url === '/computeMetadata/v1/instance/id' && req.headers['metadata-flavor'] === 'Google')
        res.writeHead(200, { 'Metadata-Flavor': 'Google' }).end(instanceId);
      else res.writeHead(404, { 'Metadata-Flavor': 'Google' }).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await exec?.stop();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await tdb?.drop();
  });

  it('runs its workflows under <K_REVISION>-<hash of the instance ID>', async () => {
    const app = uniqueName('cr-app');
    exec = await startExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      applicationVersion: 'v1',
      executorId: 'unused',
      env: { DBOS__VMID: '', K_REVISION: 'agent-app-00007-xyz', GCE_METADATA_HOST: host, AFTERLIFE_KIT: 'off' },
    });
    await exec.start('cr-wf-1', { steps: 1, stepMs: 10 });
    const expected = executorIdFor('agent-app-00007-xyz', instanceId);
    const row = await waitFor('the workflow row', async () => (await workflowRows(tdb.sql, ['cr-wf-1']))[0]);
    expect(row.executor_id).toBe(expected);
  });
});
