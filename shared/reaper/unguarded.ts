import { type Db, GUARD_TICK_WITHIN_MS, REAPER_LEASE_PREFIX } from '../../packages/executor/src/plane/index.js';
import { type UnguardedApplication, unguardedApplications } from '../db/queries/unguarded.js';
import type { ReaperDeps, ReaperState } from './types.js';

/**
 * Kits registered in this database under an application no plane guards: their deaths are
 * never recovered, silently, unless someone says so. The reaper says so (`unguarded_application`, a
 * WARNING with a log-based metric and an alert), `afterlife-plane status` shows it, and the kit warns on its side.
 * "Guarded" is a reaper lease of that application that recorded a tick lately, so two planes sharing a
 * database, each guarding its own application, report nothing about each other.
 */

/** The reaper's lease of an application: the contract's prefix plus the application name (what the kit reads). */
export const leaseName = (applicationName: string) => `${REAPER_LEASE_PREFIX}${applicationName}`;
/** A kit registered this recently counts as live even without a liveness lock to read (a kit without one). */
export const KIT_SEEN_WITHIN_MS = 600_000;
/** The reaper looks this often; each application is logged at most once a minute. */
const CHECK_EVERY_MS = 10_000;
const LOG_EVERY_MS = 60_000;

/**
 * The reaper reports an application only once its first kit has been registered this long: a plane being
 * started for it (the local stack starts one per application as its kits appear; a deploy may be seconds
 * behind its app) has had time to tick, so a fresh start logs no false WARNING. The kit's own warning comes
 * 10 s after it attaches; this is the plane's matching grace.
 */
export const UNGUARDED_GRACE_MS = 15_000;

export function findUnguarded(db: Db, except: string | undefined, registeredForMs = 0): Promise<UnguardedApplication[]> {
  return unguardedApplications(db, {
    except,
    tickWithinMs: GUARD_TICK_WITHIN_MS,
    seenWithinMs: KIT_SEEN_WITHIN_MS,
    leasePrefix: REAPER_LEASE_PREFIX,
    registeredForMs,
  });
}

/** When each unguarded application was last logged, by this process (across invocations). */
const loggedAt = new Map<string, number>();

/** The one line an operator needs: which application, which one this plane guards, and the setting to change. */
export function unguardedFix(app: UnguardedApplication, guarded: string): string {
  return `set DBOS_APPLICATION_NAME=${app.applicationName} on a plane for it, or give the app the name this plane guards (${guarded}): DBOS's application name (dbos-config.yaml \`name\`, DBOS.setConfig, or DBOS_APPLICATION_NAME)`;
}

export async function unguardedPass(deps: ReaperDeps, state: ReaperState, dryRun: boolean): Promise<void> {
  const now = deps.clock();
  if (state.unguardedCheckedAt !== undefined && now - state.unguardedCheckedAt < CHECK_EVERY_MS) return;
  state.unguardedCheckedAt = now;
  const guarded = deps.config.applicationName;
  let apps: UnguardedApplication[];
  try {
    apps = await findUnguarded(deps.db, guarded, UNGUARDED_GRACE_MS);
  } catch (err) {
    deps.logger.warn('could not look for kits of unguarded applications; the next check retries', { err });
    return;
  }
  for (const app of apps) {
    const last = loggedAt.get(app.applicationName);
    if (last !== undefined && now - last < LOG_EVERY_MS) continue;
    loggedAt.set(app.applicationName, now);
    deps.logger.warn(
      `${app.kits} live kit(s) registered under application "${app.applicationName}", which no plane in this database guards (this one guards "${guarded}"): their deaths are not recovered`,
      {
        event: 'unguarded_application',
        application: app.applicationName,
        guarded,
        kits: app.kits,
        executorIds: app.executorIds,
        fix: unguardedFix(app, guarded),
        dryRun,
      },
    );
  }
}
