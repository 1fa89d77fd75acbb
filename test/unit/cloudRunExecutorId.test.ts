import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  cloudRunExecutorId,
  EXECUTOR_ID_MAX,
  executorIdFor,
  ExecutorIdMetadataError,
} from '../../packages/executor/src/runtime/cloudRun.js';

/**
 * cloudRunExecutorId against a FAKE of Cloud Run's metadata server (a local HTTP server answering
 * /computeMetadata/v1/instance/id the way the real one does: Metadata-Flavor header required and echoed).
 * The real server exists only inside Google Cloud.
 */
let server: Server;
let host: string;
let answers: Array<{ status: number; body: string; flavor?: boolean }> = [];
const seen: IncomingMessage[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(req);
    if (req.url !== '/computeMetadata/v1/instance/id' || req.headers['metadata-flavor'] !== 'Google') {
      res.writeHead(403, { 'Metadata-Flavor': 'Google' }).end('missing Metadata-Flavor');
      return;
    }
    const a = answers.shift() ?? { status: 200, body: 'instance-default' };
    res.writeHead(a.status, a.flavor === false ? {} : { 'Metadata-Flavor': 'Google', 'Content-Type': 'application/text' }).end(a.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  answers = [];
  seen.length = 0;
});

const instance =
  '00f4ab3c9e1d2c7b8a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2';

describe('cloudRunExecutorId (fake metadata server)', () => {
  it('derives <revision>-<hash> from K_REVISION and the instance ID, the same on every call', async () => {
    answers = [
      { status: 200, body: instance },
      { status: 200, body: instance },
    ];
    const env = { K_REVISION: 'agent-app-00012-abc', GCE_METADATA_HOST: host };
    const a = await cloudRunExecutorId({ env });
    const b = await cloudRunExecutorId({ env });
    expect(a).toMatch(/^agent-app-00012-abc-[0-9a-f]{12}$/);
    expect(b).toBe(a);
    expect(a).toBe(executorIdFor('agent-app-00012-abc', instance));
    expect(seen.every((r) => r.headers['metadata-flavor'] === 'Google')).toBe(true);
  });

  it('differs between instances and between revisions, and stays within the session-name budget', () => {
    expect(executorIdFor('rev-1', 'instance-a')).not.toBe(executorIdFor('rev-1', 'instance-b'));
    expect(executorIdFor('rev-1', 'instance-a')).not.toBe(executorIdFor('rev-2', 'instance-a'));
    const long = executorIdFor('a'.repeat(63), instance);
    expect(long.length).toBeLessThanOrEqual(EXECUTOR_ID_MAX);
    // DBOS's session name for it still fits Postgres's 63 bytes up to the separator after the ID.
    expect(`dbos_transact_${long}_`.length).toBeLessThanOrEqual(63);
    expect(long.endsWith(executorIdFor('x', instance).slice(-12))).toBe(true);
  });

  it('is undefined off Cloud Run and asks nothing', async () => {
    expect(await cloudRunExecutorId({ env: { GCE_METADATA_HOST: host } })).toBeUndefined();
    expect(seen).toHaveLength(0);
  });

  it('retries a failing metadata server, then fails closed', async () => {
    answers = [
      { status: 503, body: 'busy' },
      { status: 200, body: instance },
    ];
    expect(await cloudRunExecutorId({ env: { K_REVISION: 'r-1', GCE_METADATA_HOST: host } })).toBe(executorIdFor('r-1', instance));
    answers = [
      { status: 500, body: 'x' },
      { status: 500, body: 'x' },
    ];
    await expect(cloudRunExecutorId({ env: { K_REVISION: 'r-1', GCE_METADATA_HOST: host }, attempts: 2 })).rejects.toThrow(
      ExecutorIdMetadataError,
    );
    // Nothing listening: an error naming the URL, not a default ID.
    await expect(
      cloudRunExecutorId({ env: { K_REVISION: 'r-1' }, metadataHost: '127.0.0.1:1', attempts: 1, timeoutMs: 500 }),
    ).rejects.toThrow(/cannot derive a Cloud Run executor ID: http:\/\/127\.0\.0\.1:1/);
  });

  it('rejects an answer that is not the metadata server, or not an instance ID', async () => {
    answers = [{ status: 200, body: instance, flavor: false }];
    await expect(cloudRunExecutorId({ env: { K_REVISION: 'r-1', GCE_METADATA_HOST: host }, attempts: 1 })).rejects.toThrow(
      /without Metadata-Flavor: Google/,
    );
    answers = [{ status: 200, body: '<html>proxy</html>' }];
    await expect(cloudRunExecutorId({ env: { K_REVISION: 'r-1', GCE_METADATA_HOST: host }, attempts: 3 })).rejects.toThrow(
      /instance ID must be a non-empty token/,
    );
    expect(seen).toHaveLength(2); // a malformed answer is not retried
    await expect(cloudRunExecutorId({ env: { K_REVISION: 'Not A Revision' } })).rejects.toThrow(
      /K_REVISION: must be a Cloud Run revision name/,
    );
  });
});
