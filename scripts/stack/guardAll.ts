import pg from 'pg';
import { createDb } from '../../packages/executor/src/db/pool.js';
import type { Logger } from '../../packages/executor/src/log.js';
import { findUnguarded } from '../../shared/reaper/unguarded.js';
import { registeredTargets, serveFunction, type ServedFunction, type Target } from './functions.js';
import { startScheduler, type Scheduler } from './scheduler.js';

/**
 * `npm start` guards every application whose kits register in its database, whatever DBOS calls it, so a
 * developer sets no application name anywhere (issue 27). A deployed plane guards one application (every
 * statement it runs is scoped by that name: its lease, its observations, its Redis keys, DBOS's rows with a
 * NULL name), and the local stack keeps that unit rather than threading a wildcard through the plane: for
 * each application it runs that application's own executorDeath, reaper and drain, exactly as Terraform
 * deploys them, beside the first application's.
 *
 * Every POLL_MS it asks the registry which applications have live kits and no plane ticking for them (the
 * reaper's own unguarded query) and starts a set for each new one. Nothing is ever replaced or restarted, so
 * no reaper of a guarded application stops ticking while another starts. A kit's first registration is
 * guarded about 1–3 s later (the poll, then functions-framework's start); the kit notices within its 5 s
 * watch and warns only after 10 s, and the plane's own unguarded_application waits out a grace
 * (shared/reaper/unguarded.ts), so a fresh start logs no false warning on either side.
 */
const POLL_MS = 250;
/** A set that failed to start is tried again after this long (the error is logged each time). */
const RETRY_AFTER_MS = 10_000;

export interface GuardedApplication {
  applicationName: string;
  /** The kits that made the stack guard it (up to five), as the registry listed them. */
  executorIds: string[];
  functions: ServedFunction[];
  /** Milliseconds from the guard first seeing it to its functions listening. */
  startedInMs: number;
}

export interface GuardAll {
  /** The applications guarded so far, the stack's first one included, in order. */
  guarded(): GuardedApplication[];
  /** executorDeath's URL for `applicationName`, once its functions listen. */
  deathUrl(applicationName: string): string | undefined;
  /** Whether `applicationName` is being guarded or now will be (looks at the registry once more). */
  coming(applicationName: string): Promise<boolean>;
  stop(): Promise<void>;
}

export interface GuardAllOptions {
  databaseUrl: string;
  dbosSchema: string;
  afterlifeSchema: string;
  /** The stack's first application and its functions, started before the guard. */
  first: { applicationName: string; functions: ServedFunction[] };
  /** The functions' environment; each set gets it with its own DBOS_APPLICATION_NAME. */
  fnEnv: Record<string, string>;
  scheduleMs: number;
  schedulerTimeoutMs: number;
  onFunctionLine?: (target: Target, line: string, applicationName: string) => void;
  /** Once per newly guarded application, when its functions listen. */
  onGuarded?: (g: GuardedApplication) => void;
  logger: Logger;
}

export function guardAll(o: GuardAllOptions): GuardAll {
  const pool = new pg.Pool({ connectionString: o.databaseUrl, max: 1, application_name: 'afterlife-stack' });
  const db = createDb(pool, 1, { dbosSchema: o.dbosSchema, afterlifeSchema: o.afterlifeSchema, logger: o.logger });
  const sets = new Map<string, GuardedApplication>([[o.first.applicationName, { ...o.first, executorIds: [], startedInMs: 0 }]]);
  const starting = new Map<string, Promise<void>>();
  const failedAt = new Map<string, number>();
  const schedulers: Scheduler[] = [];
  let stopped = false;

  const start = (applicationName: string, executorIds: string[]) => {
    const began = Date.now();
    const run = serveSet(o, applicationName)
      .then(({ functions, scheduler }) => {
        if (scheduler) schedulers.push(scheduler);
        const g: GuardedApplication = { applicationName, executorIds, functions, startedInMs: Date.now() - began };
        sets.set(applicationName, g);
        o.onGuarded?.(g);
      })
      .catch((err: unknown) => {
        failedAt.set(applicationName, Date.now());
        if (!stopped)
          o.logger.error(
            `could not start the functions guarding application "${applicationName}"; retrying in ${RETRY_AFTER_MS / 1000} s`,
            { err },
          );
      })
      .finally(() => starting.delete(applicationName));
    starting.set(applicationName, run);
  };

  const look = async () => {
    for (const app of await findUnguarded(db, undefined)) {
      const name = app.applicationName;
      if (sets.has(name) || starting.has(name) || Date.now() - (failedAt.get(name) ?? -Infinity) < RETRY_AFTER_MS) continue;
      start(name, app.executorIds);
    }
  };

  const loop = (async () => {
    while (!stopped) {
      await look().catch((err: unknown) => {
        if (!stopped) o.logger.debug('looking for applications to guard failed; retrying', { err });
      });
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  })();

  return {
    guarded: () => [...sets.values()],
    deathUrl: (name) => sets.get(name)?.functions.find((f) => f.target === 'executorDeath')?.url,
    coming: async (name) => {
      if (sets.has(name) || starting.has(name)) return true;
      await look().catch(() => undefined);
      return starting.has(name);
    },
    stop: async () => {
      stopped = true;
      await loop;
      await Promise.allSettled([...starting.values()]);
      await Promise.allSettled(schedulers.map((s) => s.stop()));
      const others = [...sets.values()].filter((g) => g.applicationName !== o.first.applicationName);
      await Promise.allSettled(others.flatMap((g) => g.functions.map((f) => f.proc.stop())));
      await pool.end();
    },
  };
}

/** One application's functions (every target the build registers, started side by side) and its scheduler. */
async function serveSet(o: GuardAllOptions, applicationName: string): Promise<{ functions: ServedFunction[]; scheduler?: Scheduler }> {
  const env = { ...o.fnEnv, DBOS_APPLICATION_NAME: applicationName };
  const started = await Promise.allSettled(
    registeredTargets().map((target) =>
      serveFunction(target, env, o.onFunctionLine ? (line) => o.onFunctionLine?.(target, line, applicationName) : undefined),
    ),
  );
  const functions = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.allSettled(functions.map((f) => f.proc.stop()));
    throw failed.reason;
  }
  const reaper = functions.find((f) => f.target === 'reaper');
  if (!reaper) return { functions };
  const scheduler = startScheduler({
    url: reaper.url,
    everyMs: o.scheduleMs,
    logger: o.logger.child({ application: applicationName }),
    timeoutMs: o.schedulerTimeoutMs,
  });
  return { functions, scheduler };
}
