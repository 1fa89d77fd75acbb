import type { Redis } from 'ioredis';
import { z } from 'zod';
import {
  type Db,
  type DrainTarget,
  type ExecutorRow,
  findExecutors,
  type HeartbeatValue,
  insertDrainRequests,
  InvalidInputError,
  type Logger,
  NO_NUL,
  readAllHeartbeats,
} from '../../packages/executor/src/plane/index.js';
import { enqueuedForVersions, pendingByExecutor, pendingForVersion } from '../dbos/pending.js';

/**
 * Planned drains (deploys): write drain requests that the executor kit picks up on its next beat, and
 * report progress from the registry, the heartbeats and DBOS's PENDING rows. Nothing here contacts an
 * executor: the request is data in Postgres, so it works for executors behind any network and while
 * Redis is down.
 */
const name = z.string().trim().min(1).max(512).refine(NO_NUL, 'must not contain a NUL character');
export const DrainPostBody = z
  .object({
    applicationVersion: name.optional(),
    executorIds: z.array(name).min(1, 'executorIds must not be empty').max(500).optional(),
    budgetMs: z.number().int().min(1_000).max(86_400_000).optional(),
  })
  .strict()
  .refine(
    (b) => (b.applicationVersion === undefined) !== (b.executorIds === undefined),
    'give exactly one of applicationVersion or executorIds',
  );
export type DrainPostBody = z.infer<typeof DrainPostBody>;

export const DrainQuery = z.object({ applicationVersion: name }).strict();

export type ReportedState = 'alive' | 'draining' | 'drained' | 'dead' | 'unknown';

export interface ExecutorProgress {
  executorId: string;
  applicationVersion: string | null;
  state: ReportedState;
  heartbeatAgeMs: number | null;
  inFlight: number | null;
  pending: number;
}

export interface DrainProgress {
  applicationName: string;
  applicationVersion?: string;
  executors: ExecutorProgress[];
  /** PENDING workflows of the target (of the version, whoever holds them; or of the listed executors). */
  pending: number;
  /**
   * ENQUEUED workflows pinned to the target's version (for executor IDs: to the versions they run). Only an
   * executor of that version may claim them, so after the drain they wait for one (or for the reaper's
   * orphaned-versions pass): a deploy pipeline that retires the version should look here.
   */
  enqueued: number;
  /**
   * Every executor drained or dead and nothing PENDING. Deliberately not `enqueued`: those rows are held by
   * no executor, so the drain itself is over; what becomes of them is a separate decision.
   */
  done: boolean;
  /** False when Redis could not be read: states then come from the registry alone. */
  heartbeatsKnown: boolean;
}

export interface DrainDeps {
  db: Db;
  redis: Redis | undefined;
  keyPrefix?: string;
  logger: Logger;
  applicationName: string;
  defaultBudgetMs: number;
  clock?: () => number;
}

/** Parses with zod; every failure is an InvalidInputError naming the field. */
export function parse<T>(schema: z.ZodType<T>, input: unknown, what: string): T {
  const r = schema.safeParse(input ?? {});
  if (!r.success) {
    const issues = r.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`);
    throw new InvalidInputError(`invalid ${what}: ${issues.join('; ')}`, issues);
  }
  return r.data;
}

export function drainTarget(body: DrainPostBody): DrainTarget {
  return body.executorIds ? { executorIds: [...new Set(body.executorIds)] } : { applicationVersion: body.applicationVersion ?? '' };
}

/**
 * Writes the requests. The progress report that a POST answers with is a separate read (`drainProgress`):
 * the write is what matters, and a caller told "503" after it held would not know its drain was requested.
 */
export async function requestDrain(
  deps: DrainDeps,
  body: DrainPostBody,
  requestedBy: string,
): Promise<{ target: DrainTarget; requestIds: number[]; budgetMs: number }> {
  const target = drainTarget(body);
  const budgetMs = body.budgetMs ?? deps.defaultBudgetMs;
  const requestIds = await insertDrainRequests(deps.db, { applicationName: deps.applicationName, target, budgetMs, requestedBy });
  deps.logger.notice('drain requested', { event: 'drain_requested', target, budgetMs, requestIds });
  return { target, requestIds, budgetMs };
}

export async function drainProgress(deps: DrainDeps, target: DrainTarget): Promise<DrainProgress> {
  const now = (deps.clock ?? Date.now)();
  const app = deps.applicationName;
  const rows = await findExecutors(deps.db, app, target);
  let beats: Map<string, HeartbeatValue | undefined> | undefined;
  if (deps.redis) {
    beats = await readAllHeartbeats(deps.redis, app, deps.keyPrefix).catch((err: unknown) => {
      deps.logger.warn('heartbeats unreadable; reporting registry states only', { err });
      return undefined;
    });
  }
  const registry = new Map(rows.map((r) => [r.executor_id, r]));
  const ids = new Set(registry.keys());
  if ('executorIds' in target) target.executorIds.forEach((id) => ids.add(id));
  // An executor that beats but whose registry row failed to write is still part of its version.
  else for (const [id, v] of beats ?? []) if (v?.applicationVersion === target.applicationVersion) ids.add(id);

  const executorIds = [...ids].sort();
  const pendingBy = executorIds.length ? await pendingByExecutor(deps.db, app, executorIds) : new Map<string, number>();
  const executors = executorIds.map((id): ExecutorProgress => {
    const hb = beats?.get(id);
    const beating = beats?.has(id) ?? false;
    return {
      executorId: id,
      applicationVersion: registry.get(id)?.application_version ?? hb?.applicationVersion ?? null,
      state: reportedState(registry.get(id), beating, hb, beats !== undefined),
      heartbeatAgeMs: hb ? Math.max(0, now - Date.parse(hb.beatAt)) : null,
      inFlight: hb ? hb.inFlight : null,
      pending: pendingBy.get(id) ?? 0,
    };
  });
  const pending =
    'applicationVersion' in target
      ? await pendingForVersion(deps.db, app, target.applicationVersion)
      : executors.reduce((n, e) => n + e.pending, 0);
  const versions =
    'applicationVersion' in target
      ? [target.applicationVersion]
      : [...new Set(executors.flatMap((e) => (e.applicationVersion === null ? [] : [e.applicationVersion])))];
  const enqueued = await enqueuedForVersions(deps.db, app, versions);
  return {
    applicationName: app,
    ...('applicationVersion' in target ? { applicationVersion: target.applicationVersion } : {}),
    executors,
    pending,
    enqueued,
    done: pending === 0 && executors.every((e) => e.state === 'drained' || e.state === 'dead'),
    heartbeatsKnown: beats !== undefined,
  };
}

/**
 * Dead is final (registry). A heartbeat is the live truth. Without one, an executor that drained and exited
 * is `drained`; anything else is `unknown` — it may have crashed, and only the reaper declares death.
 */
function reportedState(
  row: ExecutorRow | undefined,
  beating: boolean,
  hb: HeartbeatValue | undefined,
  heartbeatsKnown: boolean,
): ReportedState {
  if (row?.state === 'dead') return shownState(row);
  if (beating) return hb?.state ?? 'alive';
  if (row?.state === 'drained') return 'drained';
  if (!heartbeatsKnown && row) return row.state;
  return 'unknown';
}

/**
 * The registry's state as an operator should read it. An executor that drained (a drain request or a
 * SIGTERM) hands its leftovers over with a death notice of its own, and the recovery marks the row `dead`
 * (final, which fences that incarnation); the reason says it left on purpose, so it reads `drained`.
 */
export function shownState<S extends string>(row: { state: S; reason: string | null }): S | 'drained' {
  return row.state === 'dead' && (row.reason === 'drained' || row.reason === 'sigterm') ? 'drained' : row.state;
}
