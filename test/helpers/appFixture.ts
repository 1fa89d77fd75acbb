import { afterAll, beforeAll } from 'vitest';
import type { Db } from '../../packages/executor/src/db/pool.js';
import { createTestDatabase, type TestDatabase, uniqueName } from './db.js';
import type { ExecutorHandle } from './executor.js';
import { testRuntime } from './runtime.js';

/**
 * The set-up most integration files wrote by hand: one test database, a Runtime over it for one app, the
 * executors and extra runtimes a test starts, all stopped in reverse order afterwards. The area fixtures
 * (executorDeathFixture, repairFixture) build on it; reaperFixture is the reaper's own.
 */
export type RuntimeOptions = Omit<Parameters<typeof testRuntime>[0], 'databaseUrl' | 'applicationName' | 'db'>;
export type TestRuntime = ReturnType<typeof testRuntime>;

export interface AppFixtureOptions extends RuntimeOptions {
  /** A pool of the test's own for the main runtime (closed after it), e.g. to bound or name its sessions. */
  db?: (tdb: TestDatabase) => Db & { end(): Promise<void> };
  /** Run in beforeAll once the database and the runtime exist (seed rows, create tables). */
  setup?: (f: AppFixture) => Promise<void>;
  /** beforeAll's timeout, when the setup starts executors and waits on them (default: the config's hookTimeout). */
  setupTimeoutMs?: number;
}

export interface AppFixture {
  readonly app: string;
  readonly tdb: TestDatabase;
  readonly rt: TestRuntime;
  /** Executors a test starts; every one is stopped afterwards. */
  readonly executors: ExecutorHandle[];
  /** Another runtime for the same app and database (another reaper, a blind check), closed afterwards. */
  runtime(o?: RuntimeOptions): TestRuntime;
  /** Something else to close afterwards, before the runtimes (closed last-registered first). */
  onClose(close: () => Promise<unknown> | unknown): void;
}

export function need<T>(v: T | undefined, what: string): T {
  if (v === undefined) throw new Error(`${what} is not ready (used outside a test?)`);
  return v;
}

/** Registers its own beforeAll/afterAll; call it in a describe body. */
export function appFixture(prefix: string, o: AppFixtureOptions = {}): AppFixture {
  const { db: ownDb, setup, setupTimeoutMs, ...runtimeOptions } = o;
  const app = uniqueName(prefix);
  const executors: ExecutorHandle[] = [];
  const runtimes: TestRuntime[] = [];
  const closers: Array<() => Promise<unknown> | unknown> = [];
  let tdb: TestDatabase | undefined;
  let rt: TestRuntime | undefined;
  let pool: (Db & { end(): Promise<void> }) | undefined;

  const fixture: AppFixture = {
    app,
    get tdb() {
      return need(tdb, 'test database');
    },
    get rt() {
      return need(rt, 'runtime');
    },
    executors,
    runtime(extra = {}) {
      const r = testRuntime({ databaseUrl: need(tdb, 'test database').url, applicationName: app, ...extra });
      runtimes.push(r);
      return r;
    },
    onClose(close) {
      closers.push(close);
    },
  };

  beforeAll(async () => {
    tdb = await createTestDatabase();
    pool = ownDb?.(tdb);
    rt = testRuntime({ databaseUrl: tdb.url, applicationName: app, ...runtimeOptions, ...(pool ? { db: pool } : {}) });
    await setup?.(fixture);
  }, setupTimeoutMs);
  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop()));
    for (const close of closers.reverse()) await close();
    for (const r of runtimes) await r.close();
    await rt?.close();
    await pool?.end();
    await tdb?.drop();
  });
  return fixture;
}
