import { createGzip, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRuntime } from '../../../functions/runtime.js';
import '../../../functions/index.js';
import { MAX_BODY_BYTES, MAX_INFLATED_BYTES } from '../../../functions/transport.js';
import { serve } from '../../helpers/cloudEvents.js';
import { rawPost } from '../../helpers/rawPost.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Issue 23, observation 8: functions-framework inflates a compressed body up to 1024 MB before any handler
 * sees it: a 0.6 MB gzipped body (600 MiB inflated) took drain from 100 MB to 1.35 GB resident before its
 * 400. Bodies are capped before they are inflated: a Content-Length past the cap, a compressed stream past
 * it, or an inflated stream past it is a 413, and the process's memory stays bounded. Served in this
 * process, so its resident memory is the function's.
 */
const INFLATED_MIB = 256;

/** A gzip body of `mib` MiB of zeros, built a MiB at a time (this test never holds the inflated bytes). */
async function gzipBomb(mib: number): Promise<Buffer> {
  const gz = createGzip({ level: 9 });
  const out: Buffer[] = [];
  gz.on('data', (c: Buffer) => out.push(c));
  const done = new Promise<void>((r) => gz.on('end', () => r()));
  const zeros = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < mib; i++) if (!gz.write(zeros)) await new Promise((r) => gz.once('drain', r));
  gz.end();
  await done;
  return Buffer.concat(out);
}

describe('compressed request bodies are capped before they are inflated', () => {
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;
  let drain: Awaited<ReturnType<typeof serve>>;
  let death: Awaited<ReturnType<typeof serve>>;
  const app = uniqueName('trust-bomb');

  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = testRuntime({ databaseUrl: tdb.url, applicationName: app, redis: 'none' });
    useRuntime(rt);
    [drain, death] = await Promise.all([serve('drain'), serve('executorDeath')]);
  });
  afterAll(async () => {
    await Promise.all([drain, death].map((s) => s?.close()));
    await rt?.close();
    await tdb?.drop();
  });

  it(`a gzip bomb (${INFLATED_MIB} MiB inflated) is a 413 and resident memory stays bounded`, { timeout: 60_000 }, async () => {
    const bomb = await gzipBomb(INFLATED_MIB);
    expect(bomb.length).toBeLessThan(MAX_INFLATED_BYTES);
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    try {
      for (const target of [drain, death]) {
        const res = await rawPost(target.url, bomb, { 'content-encoding': 'gzip' });
        expect(res.status, res.text).toBe(413);
        expect(JSON.parse(res.text)).toMatchObject({ code: 'entity_too_large' });
        // Chunked, without a Content-Length: the inflated count stops it all the same.
        const chunked = await rawPost(target.url, bomb, { 'content-encoding': 'gzip' }, true);
        expect(chunked.status, chunked.text).toBe(413);
      }
    } finally {
      clearInterval(sampler);
    }
    const grewMiB = (peak - before) / 2 ** 20;
    console.log(`gzip bomb: ${bomb.length} bytes → ${INFLATED_MIB} MiB inflated; rss grew ${grewMiB.toFixed(1)} MiB at peak`);
    expect(grewMiB).toBeLessThan(64);
  });

  it('a Content-Length past the cap is a 413 before a byte is read; an identity body without one a 411; deflate is capped too', async () => {
    const big = Buffer.alloc(MAX_BODY_BYTES + 1, 0x20);
    expect((await rawPost(drain.url, big, {})).status).toBe(413);
    expect((await rawPost(drain.url, Buffer.from('{}'), {}, true)).status).toBe(411);
    const inflatesPast = Buffer.alloc(MAX_INFLATED_BYTES + 1, 0x20);
    expect((await rawPost(drain.url, gzipSync(inflatesPast), { 'content-encoding': 'gzip' })).status).toBe(413);
    expect((await rawPost(drain.url, deflateSync(inflatesPast), { 'content-encoding': 'deflate' })).status).toBe(413);
    expect(
      (await rawPost(drain.url, deflateRawSync(Buffer.alloc(8 * MAX_INFLATED_BYTES)), { 'content-encoding': 'deflate' })).status,
    ).toBeGreaterThanOrEqual(400);
  });

  it('a small gzipped body within the cap still works', async () => {
    const res = await rawPost(drain.url, gzipSync(Buffer.from(JSON.stringify({ applicationVersion: 'v1' }))), {
      'content-encoding': 'gzip',
    });
    expect(res.status, res.text).toBe(202);
  });
});
