import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ConfigError } from '../../../packages/executor/src/errors.js';
import { DeathNotice, deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { publishDeathNotice } from '../../../packages/executor/src/events/publish.js';
import { createKitPublisher } from '../../../packages/executor/src/runtime/publishPath.js';
import { uniqueName } from '../../helpers/db.js';

/**
 * Issue 24: the kit's death notice without `@google-cloud/pubsub`. Against the real emulator's REST API; on
 * Google Cloud the token and project come from the metadata server, which cannot run here: a FAKE metadata
 * server stands in for it (answering only with `Metadata-Flavor: Google` to requests that carry it), and a
 * recording proxy in front of the emulator shows the bearer token the kit sends.
 */
const emulatorHost = inject('pubsubEmulatorHost');
if (!emulatorHost) console.warn('!!! SKIPPED: the kit publish paths (Pub/Sub emulator not installed)');

const PROJECT = 'afterlife-test';

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function rest(path: string, method: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`http://${emulatorHost}/v1/${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  if (!res.ok && res.status !== 409) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text || '{}');
}

async function pullOne(sub: string): Promise<{ data: unknown; attributes: Record<string, string>; orderingKey?: string }> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const r = (await rest(`projects/${PROJECT}/subscriptions/${sub}:pull`, 'POST', { maxMessages: 1, returnImmediately: true })) as {
      receivedMessages?: { message: { data: string; attributes: Record<string, string>; orderingKey?: string } }[];
    };
    const m = r.receivedMessages?.[0]?.message;
    if (m)
      return {
        data: JSON.parse(Buffer.from(m.data, 'base64').toString('utf8')),
        attributes: m.attributes,
        ...(m.orderingKey ? { orderingKey: m.orderingKey } : {}),
      };
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`nothing pulled from ${sub} in 10 s`);
}

describe.skipIf(!emulatorHost)('the kit publishes death notices without the Pub/Sub client library', () => {
  const topic = uniqueName('kit-deaths');
  const sub = `${topic}-sub`;
  const metadataCalls: { path: string; flavor: string | undefined }[] = [];
  const proxied: IncomingHttpHeaders[] = [];
  let metadataHost = '';
  let proxyUrl = '';
  const servers: Server[] = [];

  beforeAll(async () => {
    await rest(`projects/${PROJECT}/topics/${topic}`, 'PUT');
    await rest(`projects/${PROJECT}/subscriptions/${sub}`, 'PUT', {
      topic: `projects/${PROJECT}/topics/${topic}`,
      enableMessageOrdering: true,
    });
    // FAKE: the metadata server of Cloud Run / GCE (not available here).
    const metadata = createServer((req, res) => {
      const flavor = req.headers['metadata-flavor'] as string | undefined;
      metadataCalls.push({ path: req.url ?? '', flavor });
      if (flavor !== 'Google') return void res.writeHead(403).end();
      res.setHeader('Metadata-Flavor', 'Google');
      if (req.url === '/computeMetadata/v1/project/project-id') return void res.end(PROJECT);
      if (req.url === '/computeMetadata/v1/instance/service-accounts/default/token')
        return void res
          .setHeader('content-type', 'application/json')
          .end(JSON.stringify({ access_token: 'fake-token-1', expires_in: 3599, token_type: 'Bearer' }));
      res.writeHead(404).end();
    });
    // Records what the kit sends, then forwards it to the real emulator.
    const proxy = createServer((req, res) => {
      proxied.push(req.headers);
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void fetch(`http://${emulatorHost}${req.url ?? '/'}`, {
          method: req.method ?? 'POST',
          headers: { 'content-type': 'application/json' },
          body: Buffer.concat(chunks),
        })
          .then(async (r) => res.writeHead(r.status, { 'content-type': 'application/json' }).end(await r.text()))
          .catch(() => res.writeHead(502).end());
      });
    });
    servers.push(metadata, proxy);
    metadataHost = await listen(metadata);
    proxyUrl = `http://${await listen(proxy)}`;
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  const notice = (executorId: string) =>
    deathNotice({ executorId, applicationName: 'app-p', reason: 'sigterm', detectedBy: `afterlife-executor:${executorId}` });

  it('PUBSUB_EMULATOR_HOST: the emulator REST endpoint, no auth; the notice arrives intact with its attributes and ordering key', async () => {
    const { publisher, path } = await createKitPublisher({
      env: { PUBSUB_EMULATOR_HOST: emulatorHost ?? '', GOOGLE_CLOUD_PROJECT: PROJECT },
    });
    expect(path).toBe('emulator');
    const id = await publishDeathNotice(publisher, topic, notice('exec-e'));
    expect(id).toMatch(/^\d+$/);
    const got = await pullOne(sub);
    expect(DeathNotice.parse(got.data)).toMatchObject({ executorId: 'exec-e', reason: 'sigterm' });
    expect(got.attributes).toMatchObject({ executorId: 'exec-e' });
    expect(got.orderingKey).toBe('exec-e');
  });

  it('on Google Cloud: project and token from the metadata server, REST publish with the bearer token', async () => {
    const before = metadataCalls.length;
    const { publisher, path } = await createKitPublisher({
      env: { GCE_METADATA_HOST: metadataHost },
      endpoint: proxyUrl,
      useClientLibrary: false,
    });
    expect(path).toBe('rest');
    await publishDeathNotice(publisher, topic, notice('exec-m'));
    await publishDeathNotice(publisher, topic, notice('exec-m'));
    expect((await pullOne(sub)).data).toMatchObject({ executorId: 'exec-m' });
    const calls = metadataCalls.slice(before);
    expect(calls.every((c) => c.flavor === 'Google')).toBe(true);
    expect(calls.filter((c) => c.path.endsWith('/project/project-id'))).toHaveLength(1);
    // Fetched once at creation and cached for the publishes.
    expect(calls.filter((c) => c.path.endsWith('/token'))).toHaveLength(1);
    expect(proxied.slice(-2).map((h) => h.authorization)).toEqual(['Bearer fake-token-1', 'Bearer fake-token-1']);
  });

  it('no emulator, no client library, no metadata server: a ConfigError that says what to set', async () => {
    const dead = await listen(
      createServer((_req, res) => res.writeHead(404).end()).on('listening', function (this: Server) {
        servers.push(this);
      }),
    );
    const err = await createKitPublisher({ env: { GCE_METADATA_HOST: dead }, useClientLibrary: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect(String((err as Error).message)).toMatch(/GOOGLE_CLOUD_PROJECT.*AFTERLIFE_PUBLISH=none/s);
  });

  it('the client library when the app has it installed (an optional peer), only when nothing lighter is configured', async () => {
    const { publisher, path } = await createKitPublisher({ env: { GOOGLE_CLOUD_PROJECT: PROJECT } });
    expect(path).toBe('client-library');
    await publisher.close();
  });
});
