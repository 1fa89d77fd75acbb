import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import type { z } from 'zod';
import { createTestDatabase, type TestDatabase, uniqueName } from './db.js';
import { type ExecutorHandle, type ExecutorOptions, startExecutor } from './executor.js';
import { kitEnv } from './kit.js';
import { TEST_REDIS_URL } from './services.js';

/** Runs the built CLI (dist/cli/index.js) as an operator would, with an explicit environment. */
export const CLI = fileURLToPath(new URL('../../dist/cli/index.js', import.meta.url));

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], env: Record<string, string | undefined>, timeoutMs = 30_000): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { PATH: process.env.PATH, METADATA_SERVER_DETECTION: 'none', ...env }, timeout: timeoutMs },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Parses the one JSON document a `--json` run prints and validates it against the command's schema. */
export function parseJson<T>(run: CliRun, schema: z.ZodType<T>): T {
  const lines = run.stdout.trim().split('\n');
  if (lines.length !== 1) throw new Error(`expected one JSON line on stdout, got ${lines.length}:\n${run.stdout}\nstderr:\n${run.stderr}`);
  return schema.parse(JSON.parse(lines[0] ?? ''));
}

/**
 * One CLI suite's world: its own test database, a unique app name, the env a CLI run gets (DATABASE_URL,
 * DBOS_APPLICATION_NAME, REDIS_URL plus `extraEnv`), and real executors of that app stopped afterwards.
 * Registers its own beforeAll/afterAll; call it in a describe body.
 */
export interface CliFixture {
  readonly app: string;
  readonly tdb: TestDatabase;
  readonly env: Record<string, string>;
  /** A real DBOS executor of the app; `kit` attaches the executor kit (heartbeat TTL 1.5 s, no publishing). */
  executor(
    executorId: string,
    applicationVersion: string,
    o?: { kit?: boolean; queues?: ExecutorOptions['queues'] },
  ): Promise<ExecutorHandle>;
}

export function cliFixture(prefix: string, extraEnv: Record<string, string> = {}): CliFixture {
  const app = uniqueName(prefix);
  const executors: ExecutorHandle[] = [];
  let tdb: TestDatabase | undefined;
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop()));
    await tdb?.drop();
  });
  const db = () => {
    if (!tdb) throw new Error('cliFixture used outside its suite');
    return tdb;
  };
  return {
    app,
    get tdb() {
      return db();
    },
    get env() {
      return { DATABASE_URL: db().url, DBOS_APPLICATION_NAME: app, REDIS_URL: TEST_REDIS_URL, ...extraEnv };
    },
    executor: async (executorId, applicationVersion, o = {}) => {
      const e = await startExecutor({
        databaseUrl: db().url,
        applicationName: app,
        applicationVersion,
        executorId,
        ...(o.queues ? { queues: o.queues } : {}),
        ...(o.kit ? { env: kitEnv({ ttlMs: 1_500 }) } : {}),
      });
      executors.push(e);
      return e;
    },
  };
}
