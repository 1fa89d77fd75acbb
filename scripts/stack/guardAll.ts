import pg from 'pg';
import { createDb, type Db } from '../../packages/executor/src/db/pool.js';
import { ConfigError, errorMessage } from '../../packages/executor/src/errors.js';
import type { Logger } from '../../packages/executor/src/log.js';
import { loadConfig } from '../../shared/config/index.js';
import { idleApplications, kitlessDbosSessions } from '../../shared/db/queries/localGuard.js';
import type { UnguardedApplication } from '../../shared/db/queries/unguarded.js';
import { findUnguarded } from '../../shared/reaper/unguarded.js';
import { registeredTargets, serveFunction, type ServedFunction, type Target } from './functions.js';
import { startScheduler, type Scheduler } from './scheduler.js';

/**
 * `npm start` guards every application whose kits register in its database, whatever DBOS calls it, so a
 * developer sets no application name anywhere. A deployed plane guards one application (every
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
 *
 * A registry row is written by anyone with the kit's grants, so what it names is input: a name the plane's
 * configuration refuses is never guarded (the plane would refuse to start under it anyway), at most
 * `maxApplications` are guarded at once (each set is three Node processes, about 280 MB), and a set whose
 * application has had no alive or draining kit for `idleStopMs` is stopped (every death among its kits has
 * been declared by then; a kit registering later has it guarded again). Each refusal is a WARNING naming
 * the fix, once per application.
 */
const POLL_MS = 250;
/** How often the guarded applications are checked for kits still alive, and DBOS sessions for a kit (cheap reads). */
const IDLE_CHECK_MS = 5_000;
/** A DBOS process connected this long with no kit registered is reported. */
const KITLESS_GRACE_MS = 15_000;
/** The set guarding an application: three functions-framework processes of about 95 MB each. */
const SET_MB = 280;
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
  /** At most this many applications guarded at once, the first included (LOCAL_MAX_APPLICATIONS). */
  maxApplications: number;
  /** A set whose application has had no alive or draining kit this long is stopped (LOCAL_GUARD_IDLE_MS). */
  idleStopMs: number;
  scheduleMs: number;
  schedulerTimeoutMs: number;
  onFunctionLine?: (target: Target, line: string, applicationName: string) => void;
  /** Once per newly guarded application, when its functions listen. */
  onGuarded?: (g: GuardedApplication) => void;
  /**
   * A DBOS session (`dbos_transact_…`) this old with no kit of its executor registered is reported (default
   * KITLESS_GRACE_MS): a kit attaches a moment after DBOS.launch(), so only a lasting one is a finding.
   */
  kitlessGraceMs?: number;
  /** Once per application whose set was stopped for want of live kits. */
  onUnguarded?: (applicationName: string) => void;
  logger: Logger;
}

/** What the guard keeps between polls. */
interface GuardState {
  sets: Map<string, GuardedApplication>;
  schedulers: Map<string, Scheduler>;
  starting: Map<string, Promise<void>>;
  stopping: Map<string, Promise<void>>;
  failedAt: Map<string, number>;
  /** Applications already warned about, with why: each is said once, not every poll. */
  warned: Map<string, 'refused' | 'bound'>;
  /** DBOS sessions already reported as running without a kit. */
  kitless: Set<string>;
  /**
   * Applications whose sets were stopped for want of kits. Their reaper's lease ticked moments ago, so the
   * unguarded query would not list a kit returning within GUARD_TICK_WITHIN_MS: these are looked at directly.
   */
  released: Set<string>;
  idleCheckedAt: number;
  stopped: boolean;
}

export function guardAll(o: GuardAllOptions): GuardAll {
  const pool = new pg.Pool({ connectionString: o.databaseUrl, max: 1, application_name: 'afterlife-stack' });
  const db = createDb(pool, 1, { dbosSchema: o.dbosSchema, afterlifeSchema: o.afterlifeSchema, logger: o.logger });
  const st: GuardState = {
    sets: new Map([[o.first.applicationName, { ...o.first, executorIds: [], startedInMs: 0 }]]),
    schedulers: new Map(),
    starting: new Map(),
    stopping: new Map(),
    failedAt: new Map(),
    warned: new Map(),
    kitless: new Set(),
    released: new Set(),
    idleCheckedAt: 0,
    stopped: false,
  };

  const look = async () => {
    for (const app of await findUnguarded(db, undefined)) {
      if (admitted(o, st, app)) startSet(o, st, app.applicationName, app.executorIds);
    }
    if (st.released.size > 0) {
      const names = [...st.released];
      const idle = new Set(await idleApplications(db, names, 0));
      for (const name of names.filter((n) => !idle.has(n))) {
        if (admitted(o, st, { applicationName: name, kits: 0, executorIds: [] })) startSet(o, st, name, []);
      }
    }
    if (Date.now() - st.idleCheckedAt >= IDLE_CHECK_MS) {
      st.idleCheckedAt = Date.now();
      await stopIdle(o, st, db);
      await reportKitless(o, st, db);
    }
  };

  const loop = (async () => {
    while (!st.stopped) {
      await look().catch((err: unknown) => {
        if (!st.stopped) o.logger.debug('looking for applications to guard failed; retrying', { err });
      });
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  })();

  return {
    guarded: () => [...st.sets.values()],
    deathUrl: (name) => st.sets.get(name)?.functions.find((f) => f.target === 'executorDeath')?.url,
    coming: async (name) => {
      if (st.sets.has(name) || st.starting.has(name)) return true;
      await look().catch(() => undefined);
      return st.starting.has(name);
    },
    stop: async () => {
      st.stopped = true;
      await loop;
      await Promise.allSettled([...st.starting.values(), ...st.stopping.values()]);
      const others = [...st.sets.values()].filter((g) => g.applicationName !== o.first.applicationName);
      await Promise.allSettled(others.map((g) => stopSet(g, st.schedulers.get(g.applicationName))));
      // The first application's scheduler belongs to the stack (scripts/stack/index.ts stops it).
      await pool.end();
    },
  };
}

/**
 * Whether an unguarded application gets a set now: not while one is starting, stopping or recently failed;
 * never under a name the plane's configuration refuses; not past the bound. A refusal is a WARNING, once.
 */
function admitted(o: GuardAllOptions, st: GuardState, app: UnguardedApplication): boolean {
  const name = app.applicationName;
  if (st.sets.has(name) || st.starting.has(name) || st.stopping.has(name)) return false;
  if (Date.now() - (st.failedAt.get(name) ?? -Infinity) < RETRY_AFTER_MS) return false;
  const kits = app.executorIds.map((id) => JSON.stringify(id)).join(', ');
  const warnOnce = (why: 'refused' | 'bound', message: string, fields: Record<string, unknown>) => {
    if (st.warned.get(name) === why) return;
    st.warned.set(name, why);
    o.logger.warn(message, {
      event: why === 'refused' ? 'stack_name_refused' : 'stack_bound_reached',
      application: name,
      executorIds: app.executorIds,
      ...fields,
    });
  };
  const refusal = nameRefusal(o.fnEnv, name);
  if (refusal !== undefined) {
    warnOnce(
      'refused',
      `not guarding application ${JSON.stringify(name)} (kits: ${kits}): the plane's configuration refuses the name (${refusal}); give the app a DBOS name the plane accepts`,
      { refusal },
    );
    return false;
  }
  if (st.sets.size + st.starting.size >= o.maxApplications) {
    warnOnce(
      'bound',
      `not guarding application ${JSON.stringify(name)} (kits: ${kits}): npm start already guards ${o.maxApplications} application(s), its bound (LOCAL_MAX_APPLICATIONS=${o.maxApplications}; each costs three processes, about ${SET_MB} MB); raise LOCAL_MAX_APPLICATIONS, or stop another application's kits (its set stops ${Math.round(o.idleStopMs / 1000)} s after its last kit)`,
      { maxApplications: o.maxApplications },
    );
    return false;
  }
  return true;
}

function startSet(o: GuardAllOptions, st: GuardState, applicationName: string, executorIds: string[]): void {
  const began = Date.now();
  const run = serveSet(o, applicationName)
    .then(async ({ functions, scheduler }) => {
      const g: GuardedApplication = { applicationName, executorIds, functions, startedInMs: Date.now() - began };
      if (st.stopped) {
        // The stack stopped while this set started: nobody else would stop it.
        await stopSet(g, scheduler);
        return;
      }
      if (scheduler) st.schedulers.set(applicationName, scheduler);
      st.sets.set(applicationName, g);
      st.released.delete(applicationName);
      st.warned.delete(applicationName);
      o.onGuarded?.(g);
    })
    .catch((err: unknown) => {
      st.failedAt.set(applicationName, Date.now());
      if (!st.stopped)
        o.logger.error(
          `could not start the functions guarding application ${JSON.stringify(applicationName)}; retrying in ${RETRY_AFTER_MS / 1000} s`,
          { err },
        );
    })
    .finally(() => st.starting.delete(applicationName));
  st.starting.set(applicationName, run);
}

/** Stops the sets of applications (never the first) whose kits have all been dead or drained for idleStopMs. */
async function stopIdle(o: GuardAllOptions, st: GuardState, db: Db): Promise<void> {
  const others = [...st.sets.keys()].filter((name) => name !== o.first.applicationName);
  if (others.length === 0) return;
  for (const name of await idleApplications(db, others, o.idleStopMs)) {
    const g = st.sets.get(name);
    if (!g || st.stopped) continue;
    st.sets.delete(name);
    const scheduler = st.schedulers.get(name);
    st.schedulers.delete(name);
    const run = stopSet(g, scheduler)
      .then(() => {
        o.logger.info(
          `stopped guarding application ${JSON.stringify(name)}: no alive or draining kit for ${Math.round(o.idleStopMs / 1000)} s (LOCAL_GUARD_IDLE_MS); it is guarded again when a kit registers`,
          { event: 'stack_unguarding', application: name },
        );
        st.released.add(name);
        o.onUnguarded?.(name);
      })
      .finally(() => st.stopping.delete(name));
    st.stopping.set(name, run);
  }
}

/**
 * A DBOS process connected to this database with no alive kit of its executor runs unguarded, and nothing
 * else says so: a launch that failed (an app whose starter logs the error and runs on) never reaches
 * attachExecutor. The failure seen in practice is DBOS refusing a second application that registers a version
 * string another application in the database already owns (DBOS 5.3's application_versions), which two of
 * DBOS's own demo apps ("0.1.0" each) hit; the WARNING names that fix beside the plain one. Read from
 * pg_stat_activity: a role that cannot see other sessions sees none, and nothing is reported.
 */
async function reportKitless(o: GuardAllOptions, st: GuardState, db: Db): Promise<void> {
  for (const session of await kitlessDbosSessions(db, o.kitlessGraceMs ?? KITLESS_GRACE_MS)) {
    if (st.kitless.has(session) || st.stopped) continue;
    st.kitless.add(session);
    o.logger.warn(
      `a DBOS process is connected with no afterlife kit registered (session ${JSON.stringify(session)}): its deaths are not recovered. ` +
        `Attach the kit after DBOS.launch(); if its launch failed with "Application version '…' is already registered by application '…'", ` +
        `two applications share this database with one version string, which DBOS refuses: give each its own (DBOS__APPVERSION, or applicationVersion in DBOS.setConfig)`,
      { event: 'stack_kitless_dbos', session },
    );
  }
}

/** Its scheduler first (no call reaches a reaper being stopped), then its functions side by side. */
async function stopSet(g: GuardedApplication, scheduler: Scheduler | undefined): Promise<void> {
  await scheduler?.stop();
  await Promise.allSettled(g.functions.map((f) => f.proc.stop()));
}

/**
 * Why the plane's configuration refuses `applicationName` (its first message), or undefined when it accepts
 * it: the same loader a deployed plane starts with, over the environment the set's functions would get.
 */
function nameRefusal(fnEnv: Record<string, string>, applicationName: string): string | undefined {
  try {
    loadConfig({ ...fnEnv, DBOS_APPLICATION_NAME: applicationName });
    return undefined;
  } catch (err) {
    if (err instanceof ConfigError) return err.issues.join('; ');
    return errorMessage(err);
  }
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
