/**
 * Bounds on the plane's durations and thresholds beyond each variable's own range: the timer
 * ceiling, the relations between variables, and the floors of the thresholds that cancel or delete work.
 * docs/configuration.md ("Floors", "Durations") lists them; test/docs/configuration.test.ts checks the list.
 * @module
 */

/**
 * Node's timers hold a signed 32-bit millisecond count: a longer delay fires after 1 ms (a lock TTL of
 * 2^53−1 extended the lock every millisecond, a connect timeout of 2^31 failed every start at once).
 * Postgres's statement_timeout is an int of ms too. Every duration the plane arms a timer with stays under it.
 */
// The contract defines it: the kit's durations stay under the same ceiling.
export { MAX_TIMER_MS } from '../../packages/executor/src/plane/index.js';

/**
 * Thresholds compared with a clock rather than armed as timers (an age, a timeout since creation) may be
 * longer than a timer, but `now − threshold` must stay a timestamp Postgres can hold: ~3·10^14 ms made
 * every retention pass fail with `timestamp out of range`. A hundred years is more history than anyone keeps.
 */
export const MAX_AGE_MS = 100 * 365 * 86_400_000;

/** The variable that says the operator means a threshold below its floor: names of FLOORS' variables, comma-separated. */
export const ALLOW_BELOW_FLOOR = 'AFTERLIFE_ALLOW_BELOW_FLOOR';

/** The values a floor judges, as the schema parsed them (0 = off where the variable allows it). */
export interface FloorInput {
  WORKFLOW_GLOBAL_TIMEOUT_MS: number;
  RETENTION_MAX_AGE_MS: number;
  RETENTION_MAX_COMPLETED: number;
  STUCK_AFTER_MS: number;
  STUCK_POLICY: string;
}

export interface Floor {
  variable: keyof FloorInput & string;
  floor: number;
  /** Whether the value as set cancels or deletes at all (off, or a policy that only reports, has no floor). */
  applies: (e: FloorInput) => boolean;
  /** What a value below the floor does, for the error. */
  harm: string;
}

/**
 * Each threshold that cancels or deletes work, with the smallest value taken without the override. A
 * floor is a guard against a unit slip (seconds or minutes written as milliseconds, "60" meant as a
 * minute), not a recommendation: each sits above any value a unit slip of a sensible setting produces
 * and below the values the docs suggest. Below it, start fails unless AFTERLIFE_ALLOW_BELOW_FLOOR names the
 * variable, and then every start logs a WARNING saying so.
 */
export const FLOORS: readonly Floor[] = [
  {
    variable: 'WORKFLOW_GLOBAL_TIMEOUT_MS',
    floor: 600_000,
    applies: (e) => e.WORKFLOW_GLOBAL_TIMEOUT_MS > 0,
    harm: 'cancels every workflow not completed this long after creation (60 cancelled all in-flight work on the first tick)',
  },
  {
    variable: 'RETENTION_MAX_AGE_MS',
    floor: 86_400_000,
    applies: (e) => e.RETENTION_MAX_AGE_MS > 0,
    harm: 'deletes completed workflows older than this, for good',
  },
  {
    variable: 'RETENTION_MAX_COMPLETED',
    floor: 1_000,
    applies: (e) => e.RETENTION_MAX_COMPLETED > 0,
    harm: 'deletes every completed workflow but this many, for good',
  },
  {
    variable: 'STUCK_AFTER_MS',
    floor: 600_000,
    applies: (e) => e.STUCK_POLICY !== 'report',
    harm: 'with a cancelling STUCK_POLICY, cancels a live workflow whose step runs longer than this',
  },
];

/**
 * Problems with thresholds below their floors that the override does not name, and the warnings for those
 * it does. `allow` is the override's list (already checked to name floors only).
 */
export function floorProblems(e: FloorInput, allow: readonly string[]): { problems: string[]; warnings: string[] } {
  const problems: string[] = [];
  const warnings: string[] = [];
  for (const f of FLOORS) {
    const value = e[f.variable];
    if (!f.applies(e) || typeof value !== 'number' || value >= f.floor) continue;
    const said = `${f.variable}=${value} is below its floor of ${f.floor}: it ${f.harm}`;
    if (allow.includes(f.variable)) warnings.push(`${said}; allowed by ${ALLOW_BELOW_FLOOR}`);
    else problems.push(`${f.variable}: ${said}. Raise it, or set ${ALLOW_BELOW_FLOOR}=${f.variable} if you mean it`);
  }
  return { problems, warnings };
}

/** The durations the relations judge. */
export interface RelationInput {
  REAPER_TICK_MS: number;
  REAPER_LEASE_MS: number;
}

/** Relations between durations that each variable's own range cannot express. */
export function relationProblems(e: RelationInput): string[] {
  const problems: string[] = [];
  // A lease shorter than two ticks lapses between renewals: a second reaper takes it while the first ticks.
  if (e.REAPER_LEASE_MS < 2 * e.REAPER_TICK_MS) {
    problems.push(`REAPER_LEASE_MS: ${e.REAPER_LEASE_MS} must be at least two ticks (2 × REAPER_TICK_MS = ${2 * e.REAPER_TICK_MS})`);
  }
  return problems;
}
