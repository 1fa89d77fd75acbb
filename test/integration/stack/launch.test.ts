import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * Issue 27: `npm start` rebuilt on every run (20.8 s) while printing "up (7.4 s)". Run through npm itself,
 * on the fresh build `npm test` has just made: it must not rebuild, and the time to ready it reports is
 * counted from when `npm start` began (npm's own launch included), so it matches what a person waits.
 */
const ROOT = join(import.meta.dirname, '../../..');

describe('npm start on a fresh build', () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  it('does not rebuild, and reports its time to ready from when npm start began', { timeout: 90_000 }, async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: tdb.url,
      REDIS_URL: TEST_REDIS_URL,
      LOCAL_PUBSUB: 'bridge',
      METADATA_SERVER_DETECTION: 'none',
    };
    const began = Date.now();
    const child = spawn('npm', ['start', '--', '--json'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    let err = '';
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      const { startedInMs, readyAt } = await new Promise<{ startedInMs: number; readyAt: number }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`npm start not ready in 60 s:\n${out}\n${err}`)), 60_000);
        child.stdout.on('data', (b: Buffer) => {
          out += b.toString();
          const line = out.split('\n').find((l) => l.startsWith('{"ready":true'));
          if (line) {
            clearTimeout(timer);
            resolve({ startedInMs: (JSON.parse(line) as { startedInMs: number }).startedInMs, readyAt: Date.now() });
          }
        });
        void exited.then(() => reject(new Error(`npm start exited before ready:\n${out}\n${err}`)));
      });
      const waited = readyAt - began;
      console.log(`[npm start] ready ${waited} ms after spawning npm; it reported ${startedInMs} ms`);
      expect(err).toContain('the build is current: not rebuilding');
      expect(err).not.toMatch(/building \(/);
      // Never more than what was waited; at most the reading of one line less (npm starts right at spawn).
      expect(startedInMs).toBeLessThanOrEqual(waited + 20);
      expect(startedInMs).toBeGreaterThanOrEqual(waited - 150);
    } finally {
      if (child.pid && child.exitCode === null) process.kill(-child.pid, 'SIGTERM');
      await exited;
    }
  });
});
