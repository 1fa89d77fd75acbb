import { canSeeOtherSessions, DBOS_PYTHON_SESSION_NAME, unattributedSessions, type UnattributedSessions } from '../dbos/reaper.js';
import { LogThrottle } from '../../packages/executor/src/plane/index.js';
import type { ReaperDeps, ReaperState } from './types.js';

/**
 * Sessions that name no executor (DBOS for Python's `dbos_transact`, an empty name) leave "this executor has
 * no session" without meaning: the process may be behind one of them. While any is open, executors without
 * the kit are unknown, and unknown is never a death (docs/reaper.md#executors-without-the-kit). The reaper
 * looks for them every CENSUS_EVERY_MS, whether or not such an executor owns work yet, so the operator hears
 * of the first such process within seconds, not when a long step is already at stake.
 */
export const CENSUS_EVERY_MS = 5_000;

/** Repeated at most once a minute per application and set of names while the sessions stay open. */
const reports = new LogThrottle(60_000);

export const UNATTRIBUTED_FIX =
  'attach the Python kit after DBOS.launch() (afterlife_executor.attach_executor()), or name the sessions per executor in the DBOS config: ' +
  `db_engine_kwargs={"connect_args": {"application_name": f"dbos_transact_{executor_id}_{application_version}"}}`;

export type Census = { sessions: UnattributedSessions[] } | { invisible: true };

/**
 * The sessions that name nobody, read now when `now` is set (an executor without the kit is being judged this
 * tick), else at most every CENSUS_EVERY_MS; undefined when not due or not needed.
 */
export async function unattributedCensus(deps: ReaperDeps, state: ReaperState, o: { now: boolean }): Promise<Census | undefined> {
  if (deps.config.reaper.sessionEvidence === 'none') return undefined;
  const at = deps.clock();
  if (!o.now && state.unattributedCheckedAt !== undefined && at - state.unattributedCheckedAt < CENSUS_EVERY_MS) return undefined;
  state.unattributedCheckedAt = at;
  if (!(await canSeeOtherSessions(deps.db))) return { invisible: true };
  return { sessions: await unattributedSessions(deps.db) };
}

/**
 * The WARNING: always for DBOS for Python's own `dbos_transact` (such a process is there whether or not it
 * owns work yet); for sessions with no name (any tool may open one) only when they stop an executor without
 * the kit from being judged (`blocking`).
 */
export function reportUnattributed(
  deps: ReaperDeps,
  sessions: UnattributedSessions[],
  o: { blocking: boolean; log: ReaperDeps['logger'] },
): void {
  const worth = o.blocking ? sessions : sessions.filter((s) => s.name === DBOS_PYTHON_SESSION_NAME);
  if (worth.length === 0 || !reports.pass(`${deps.config.applicationName}\0${worth.map((s) => s.name).join('\0')}`).log) return;
  o.log.warn(
    'sessions that name no executor are open in this database: executors without the kit cannot be judged, and are never declared dead',
    {
      event: 'sessions_unattributed',
      sessions: worth.map((s) => ({ applicationName: s.name, count: s.sessions, users: s.users, clients: s.clients })),
      fix: UNATTRIBUTED_FIX,
    },
  );
}
