import { existsSync } from 'node:fs';
import { createServer } from 'node:net';

/** Where the real services live; CI's .ci/run makes sure they are up. */
export const ADMIN_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const PUBSUB_EMULATOR_BIN =
  process.env.PUBSUB_EMULATOR_BIN ?? '/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator';

export function databaseUrl(name: string): string {
  const u = new URL(ADMIN_DATABASE_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

export function emulatorInstalled(): boolean {
  return existsSync(PUBSUB_EMULATOR_BIN);
}

/** A TCP port free on 127.0.0.1 right now (for a private server a test starts). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}
