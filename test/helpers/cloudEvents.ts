import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { getTestServer } from '@google-cloud/functions-framework/testing';

/** A binary-mode Eventarc Pub/Sub CloudEvent, as Eventarc delivers it. */
export function pubsubCloudEvent(
  data: string | Buffer | undefined,
  opts: { messageId?: string; attributes?: Record<string, string>; topic?: string } = {},
) {
  const messageId = opts.messageId ?? String(Math.floor(Math.random() * 1e12));
  const encoded = data === undefined ? undefined : Buffer.isBuffer(data) ? data.toString('base64') : Buffer.from(data).toString('base64');
  return {
    headers: {
      'content-type': 'application/json',
      'ce-id': messageId,
      'ce-specversion': '1.0',
      'ce-type': 'google.cloud.pubsub.topic.v1.messagePublished',
      'ce-source': `//pubsub.googleapis.com/projects/demo/topics/${opts.topic ?? 'executor-deaths'}`,
      'ce-time': new Date().toISOString(),
    },
    body: JSON.stringify({
      message: {
        ...(encoded !== undefined ? { data: encoded } : {}),
        attributes: opts.attributes ?? {},
        messageId,
        publishTime: new Date().toISOString(),
      },
      subscription: 'projects/demo/subscriptions/eventarc-test',
    }),
  };
}

export async function serve(target: string): Promise<{ url: string; server: Server; close: () => Promise<void> }> {
  const server = getTestServer(target);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, server, close: () => new Promise<void>((r) => server.close(() => r())) };
}

export async function postEvent(url: string, ev: { headers: Record<string, string>; body: string }): Promise<Response> {
  return fetch(url, { method: 'POST', headers: ev.headers, body: ev.body });
}
