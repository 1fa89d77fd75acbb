import {
  type Absence,
  type Evidence,
  readStreaks,
  recordAbsent,
  recordPresent,
  resetHeartbeatAbsences,
} from '../db/queries/observations.js';
import type { ReaperDeps, ReaperState, TickContext } from './types.js';

/**
 * Where the dead pass records what it observed: executor_observations, or — for a dry run, which writes
 * nothing — a copy in the invocation's memory laid over the persisted rows, so a dry run's second tick
 * still sees its first tick's absences and lists the deaths a real run would declare.
 */
export interface Observations {
  present(executorIds: string[], evidence: Evidence): Promise<void>;
  absent(executorIds: string[], evidence: Evidence, continuityMs: number): Promise<Absence[]>;
  /** Redis lost its keys: every heartbeat-absence streak restarts. */
  resetHeartbeat(): Promise<void>;
}

interface Streak {
  evidence: Evidence | null;
  firstAbsentMs: number | null;
  lastAbsentMs: number | null;
  absentTicks: number;
}

/** A dry run's streaks, by executor, and whether it reset the persisted heartbeat streaks. */
export interface DryStreaks {
  byId: Map<string, Streak>;
  heartbeatReset: boolean;
}

const CLEAR: Streak = { evidence: null, firstAbsentMs: null, lastAbsentMs: null, absentTicks: 0 };

export function observations(deps: ReaperDeps, ctx: Pick<TickContext, 'dryRun'>, state: ReaperState): Observations {
  const { db } = deps;
  const app = deps.config.applicationName;
  if (!ctx.dryRun) {
    return {
      present: (ids, evidence) => recordPresent(db, app, ids, evidence),
      absent: (ids, evidence, continuityMs) => recordAbsent(db, app, ids, evidence, continuityMs),
      resetHeartbeat: () => resetHeartbeatAbsences(db, app),
    };
  }
  const dry = (state.dryStreaks ??= { byId: new Map(), heartbeatReset: false });
  return {
    present: async (ids) => {
      for (const id of ids) dry.byId.set(id, CLEAR);
    },
    resetHeartbeat: async () => {
      dry.heartbeatReset = true;
      for (const [id, s] of dry.byId) if (s.evidence === 'heartbeat') dry.byId.set(id, CLEAR);
    },
    // The same streak rule as recordAbsent's statement (CONTINUES), on the database clock it read.
    absent: async (ids, evidence, continuityMs) =>
      (await readStreaks(db, app, ids)).map((r) => {
        const persisted = dry.heartbeatReset && r.evidence === 'heartbeat' ? CLEAR : r;
        const prev = dry.byId.get(r.executorId) ?? persisted;
        const continues =
          prev.evidence === evidence &&
          prev.firstAbsentMs !== null &&
          prev.lastAbsentMs !== null &&
          prev.lastAbsentMs >= r.nowMs - continuityMs;
        const first = continues && prev.firstAbsentMs !== null ? prev.firstAbsentMs : r.nowMs;
        const next: Streak = { evidence, firstAbsentMs: first, lastAbsentMs: r.nowMs, absentTicks: continues ? prev.absentTicks + 1 : 1 };
        dry.byId.set(r.executorId, next);
        return { executorId: r.executorId, absentMs: r.nowMs - first, absentTicks: next.absentTicks, declaredAgoMs: r.declaredAgoMs };
      }),
  };
}
