import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * Issue 20: outside Google Cloud a kit's SIGTERM printed `MetadataLookupWarning` on the app's stderr: its
 * death notice is its first publish, and the Pub/Sub client asked the metadata server which universe it
 * is in although the emulator needs no credentials. Run as the kit runs it (a fresh process, the emulator
 * named by PUBSUB_EMULATOR_HOST, no METADATA_SERVER_DETECTION), the publish says nothing on stderr.
 * The emulator address is closed: the publish fails, which is what the kit then logs itself.
 */
const run = promisify(execFile);
const PUBLISHER = new URL('../../../dist/packages/executor/src/events/publisher.js', import.meta.url).href;

describe('the kit’s publisher outside Google Cloud', () => {
  it('publishes to the emulator without a MetadataLookupWarning', { timeout: 60_000 }, async () => {
    const script = [
      `const { createPubSubPublisher } = await import(${JSON.stringify(PUBLISHER)});`,
      `const pub = await createPubSubPublisher('afterlife-test', undefined);`,
      `await Promise.race([pub.publish('t', { a: 1 }, {}, 'k').catch(() => undefined), new Promise((r) => setTimeout(r, 5000))]);`,
      `await pub.close().catch(() => undefined);`,
      `process.exit(0);`,
    ].join('\n');
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: '/nonexistent', PUBSUB_EMULATOR_HOST: '127.0.0.1:1' };
    const { stderr } = await run(process.execPath, ['--input-type=module', '-e', script], { env, timeout: 30_000 });
    expect(stderr).not.toMatch(/MetadataLookupWarning/);
    expect(stderr).toBe('');
  });
});
