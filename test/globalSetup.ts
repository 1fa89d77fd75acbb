import { type ChildProcess, spawn } from 'node:child_process';
import { DBOS } from '@dbos-inc/dbos-sdk';
import pg from 'pg';
import type {} from 'vitest';
import type { TestProject } from 'vitest/node';
import { migrate } from '../shared/db/migrate.js';
import { createDb } from '../packages/executor/src/db/pool.js';
import { silentLogger } from '../packages/executor/src/log.js';
import { ADMIN_DATABASE_URL, databaseUrl, emulatorInstalled, freePort, PUBSUB_EMULATOR_BIN } from './helpers/services.js';

/**
 * Once per run: a template database with DBOS's system schema (migrated by DBOS itself) and afterlife's
 * schema, cloned per test file; and the real Pub/Sub emulator when it is installed. Names carry the pid
 * so parallel runs on one machine don't collide.
 */
declare module 'vitest' {
  export interface ProvidedContext {
    templateDb: string;
    pubsubEmulatorHost: string | null;
  }
}

const templateDb = `afterlife_tpl_${process.pid}`;
let emulator: ChildProcess | undefined;

export async function setup(project: TestProject): Promise<void> {
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await admin.connect();
  await dropStale(admin);
  await admin.query(`DROP DATABASE IF EXISTS ${templateDb} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${templateDb}`);
  await admin.end();

  const url = databaseUrl(templateDb);
  await DBOS.migrate(url);
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  await migrate(createDb(pool, 1, { dbosSchema: 'dbos', afterlifeSchema: 'afterlife', logger: silentLogger() }));
  await pool.end();
  project.provide('templateDb', templateDb);

  if (emulatorInstalled()) {
    const port = await freePort();
    emulator = spawn(PUBSUB_EMULATOR_BIN, [`--host=127.0.0.1`, `--port=${port}`], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('pubsub emulator did not start in 30 s')), 30_000);
      const onData = (b: Buffer) => {
        if (b.toString().includes('Server started')) {
          clearTimeout(timer);
          resolve();
        }
      };
      emulator?.stdout?.on('data', onData);
      emulator?.stderr?.on('data', onData);
      emulator?.once('exit', (code) => reject(new Error(`pubsub emulator exited with ${code}`)));
    });
    project.provide('pubsubEmulatorHost', `127.0.0.1:${port}`);
  } else {
    console.warn(
      `\n!!! Pub/Sub emulator not installed at ${PUBSUB_EMULATOR_BIN}: the emulator suites are SKIPPED ` +
        `(executorDeath through Pub/Sub, the local stack). Install google-cloud-cli-pubsub-emulator and Java 17 to run them.\n`,
    );
    project.provide('pubsubEmulatorHost', null);
  }
}

export async function teardown(): Promise<void> {
  if (emulator?.pid) {
    try {
      process.kill(-emulator.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${templateDb} WITH (FORCE)`);
  await admin.end();
}

/** Databases left by runs that were killed (their pid is gone). */
async function dropStale(admin: pg.Client): Promise<void> {
  const res = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname ~ '^afterlife_(tpl|t)_[0-9]+'`);
  for (const { datname } of res.rows) {
    const pid = Number(/^afterlife_(?:tpl|t)_(\d+)/.exec(datname)?.[1]);
    if (pid && !alive(pid)) await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
