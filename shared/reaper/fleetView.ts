import type { ExecutorRow } from '../../packages/executor/src/plane/index.js';
import { holdersGone, type Holder, readRegistry, type WatchedRow } from '../db/queries/fleetWatch.js';
import type { Evidence } from '../db/queries/observations.js';
import { type LockEvidence, readLocks } from './evidence.js';
import type { Observations } from './observe.js';
import type { ReaperDeps, ReaperState } from './types.js';

/**
 * What one invocation remembers of the fleet between ticks, so a tick reads what changed rather than every
 * executor (at 100 executors a tick read ~5 pages and wrote a row lock per executor, four times
 * a second, and the liveness join's cost grew with the fleet).
 *
 * - **Registry**: the live rows, then each tick only rows written since (migration 0017's stamp, fleetWatch
 *   readRegistry): a new executor, a new incarnation, a new lock holder, a state change.
 * - **Locks**: each executor whose lock the full reading (readLiveness, the holder check) found held is
 *   remembered with its holder as the registry recorded it; each tick one statement over pg_locks (shared
 *   memory, no table pages) returns the remembered holders that no longer hold. Those — and every executor
 *   whose row changed, was never seen holding, or is in this tick's slice — get the full reading. A lock
 *   that vanished is therefore judged on the same tick as before; nothing is ever judged on memory alone:
 *   memory only says "still held", and only what Postgres says this tick.
 * - **Slice**: besides, once a second the registry rows of the holders whose ID hashes to that second's
 *   slot are read again, so every remembered holder is checked against its row as it is now at least every
 *   FULL_CHECK_EVERY_MS, whatever the stamps say (a row deleted by hand, a stamp a misapplied migration
 *   never wrote).
 * - **Heartbeats** are read for executors whose lock is not held (a held lock is life whatever Redis says,
 *   shared/reaper/deathRule.ts), and for all on a full tick.
 * - **Observations**: an executor's "present" is written when this invocation has not written it since it
 *   last recorded an absence (or ever): a quiet fleet writes nothing. Only the lease holder writes
 *   executor_observations, so what this invocation wrote is what is there; a view older than the lease
 *   (another reaper may have ticked since) is dropped, and the next tick is full.
 *
 * The first tick of an invocation (and any tick after a failed pass, or a view older than the lease) is a
 * full tick: every live row, every lock, every heartbeat, every present.
 */
export interface FleetView {
  /** When this view was last brought up to date (reaper clock, epoch ms). */
  at: number;
  /** Live (alive, draining) registry rows, with their lock's key and recorded holder. */
  live: Map<string, WatchedRow>;
  /** Registry rows written by a transaction at or above this ID are read again next tick. */
  horizon: string;
  /** Executors whose lock the full reading last found held by their kit's registered session. */
  held: Map<string, Holder>;
  /** Executors whose observation row this invocation wrote present, with no absence recorded since. */
  clear: Set<string>;
  /** The second (epoch s) whose slice of registry rows was last read again (rereadSlice). */
  slicedAt?: number;
}

/** Every remembered holder is also read in full (readLocks) at least this often (a slice of them each second). */
export const FULL_CHECK_EVERY_MS = 10_000;
const SLICE_EVERY_MS = 1_000;

/** One tick's use of the view: the registry as of now, and whether this tick reads everything. */
export interface FleetTick {
  view: FleetView;
  full: boolean;
  /** Executors whose registry row changed this tick (their remembered holder is forgotten). */
  changed: Set<string>;
}

/**
 * The view for this tick, brought up to date from the registry. Taken out of the state while the pass runs:
 * a pass that fails leaves none, so the next tick is full (put back by `keepView` when the pass ends).
 */
export async function watchFleet(deps: Pick<ReaperDeps, 'db' | 'config' | 'clock'>, state: ReaperState): Promise<FleetTick> {
  const app = deps.config.applicationName;
  const prior = state.fleet;
  delete state.fleet;
  const now = deps.clock();
  if (!prior || now - prior.at > deps.config.reaper.leaseMs) {
    const r = await readRegistry(deps.db, app);
    const view: FleetView = {
      at: now,
      live: new Map(r.rows.map((x) => [x.executor_id, x])),
      horizon: r.horizon,
      held: new Map(),
      clear: new Set(),
    };
    return { view, full: true, changed: new Set() };
  }
  const r = await readRegistry(deps.db, app, { since: prior.horizon });
  const changed = applyChanges(prior, r.rows);
  prior.horizon = r.horizon;
  prior.at = now;
  await rereadSlice(deps, prior, now);
  return { view: prior, full: false, changed };
}

/**
 * The registry rows written since the last read, into the view: a live row is (re)placed, any other state
 * leaves it, and either way its remembered holder is forgotten. Returns the executors that changed.
 */
export function applyChanges(view: FleetView, rows: WatchedRow[]): Set<string> {
  const changed = new Set<string>();
  for (const row of rows) {
    // Read again only because a transaction somewhere in the cluster is older than the last read: not news,
    // and the holder remembered for it stays.
    if (row.changed_xid !== null && view.live.get(row.executor_id)?.changed_xid === row.changed_xid) continue;
    changed.add(row.executor_id);
    view.held.delete(row.executor_id);
    if (isLive(row)) view.live.set(row.executor_id, row);
    else view.live.delete(row.executor_id);
  }
  return changed;
}

function isLive(row: WatchedRow): boolean {
  return row.state === 'alive' || row.state === 'draining';
}

/**
 * Once a second, the registry rows of the remembered holders whose ID hashes to that second's slot are read
 * again, whatever the stamps say: a row that is gone or no longer live leaves the view; one whose recorded
 * holder differs from the remembered one loses it (the full reading decides this tick). One that agrees
 * keeps it, and this tick's holder check over pg_locks is then readLiveness's own test on the registry as it
 * is now. So every holder is checked against a fresh row at least every FULL_CHECK_EVERY_MS.
 */
async function rereadSlice(deps: Pick<ReaperDeps, 'db' | 'config'>, view: FleetView, now: number): Promise<void> {
  const second = Math.floor(now / SLICE_EVERY_MS);
  if (view.slicedAt === second) return;
  view.slicedAt = second;
  const slices = Math.max(1, Math.round(FULL_CHECK_EVERY_MS / SLICE_EVERY_MS));
  const ids = [...view.held.keys()].filter((id) => fnv1a(id) % slices === second % slices);
  if (ids.length === 0) return;
  applyReread(view, ids, (await readRegistry(deps.db, deps.config.applicationName, { ids })).rows);
}

/**
 * Remembered holders' rows read again: gone or no longer live leaves the view; a recorded holder other than
 * the remembered one is forgotten (the full reading decides); an agreeing one is kept.
 */
export function applyReread(view: FleetView, ids: string[], rows: WatchedRow[]): void {
  const fresh = new Map(rows.map((r) => [r.executor_id, r]));
  for (const id of ids) {
    const row = fresh.get(id);
    if (!row || !isLive(row)) {
      view.live.delete(id);
      view.held.delete(id);
      continue;
    }
    view.live.set(id, row);
    if (!sameHolder(view.held.get(id), holderOf(row))) view.held.delete(id);
  }
}

function sameHolder(a: Holder | undefined, b: Holder | undefined): boolean {
  return (
    a !== undefined &&
    b !== undefined &&
    a.keyHi === b.keyHi &&
    a.keyLo === b.keyLo &&
    a.pid === b.pid &&
    a.usesysid === b.usesysid &&
    a.started === b.started
  );
}

/** The pass ended: the view serves the next tick. */
export function keepView(state: ReaperState, t: FleetTick): void {
  state.fleet = t.view;
}

/**
 * Which of `withLock` hold their liveness lock this tick. Remembered holders not in this tick's slice are
 * asked only whether they still hold (fleetWatch holdersGone); everyone else — and every one of those that
 * no longer does — gets the full reading (readLocks: the holder check, squatters, the server's uptime).
 */
export async function readLocksWatched(
  deps: ReaperDeps,
  t: FleetTick,
  withLock: string[],
  registry: Map<string, ExecutorRow>,
): Promise<LockEvidence> {
  const { view } = t;
  const fast: Holder[] = [];
  const full: string[] = [];
  for (const id of withLock) {
    const h = t.full ? undefined : view.held.get(id);
    if (h) fast.push(h);
    else full.push(id);
  }
  const stillHeld = new Set<string>();
  if (fast.length) {
    const r = await holdersGone(deps.db, fast);
    for (const h of fast) {
      if (r.gone.has(h.executorId)) full.push(h.executorId);
      else stillHeld.add(h.executorId);
    }
  }
  const read = await readLocks(deps, full);
  for (const id of full) {
    const row = read.held.has(id) ? view.live.get(id) : undefined;
    const holder = row && registry.get(id) === row ? holderOf(row) : undefined;
    if (holder) view.held.set(id, holder);
    else view.held.delete(id);
  }
  return { ...read, held: new Set([...stillHeld, ...read.held]) };
}

/** The holder the full reading verified, as the registry row recorded it; none for kits the fast check cannot follow. */
function holderOf(row: WatchedRow): Holder | undefined {
  // A kit from before incarnations holds the legacy two-int4 lock, and a row that names no session yet
  // (the lock taken after this row was read): read the full way until the registry names its holder.
  if (row.incarnation === null || row.liveness_pid === null) return undefined;
  return {
    executorId: row.executor_id,
    keyHi: row.key_hi,
    keyLo: row.key_lo,
    pid: row.liveness_pid,
    usesysid: row.holder_usesysid,
    started: row.holder_started,
  };
}

/**
 * Observations that write "present" only where this invocation has not already (or has recorded an
 * absence since): a row that says nothing is left unread and unlocked. A full tick writes every one.
 */
export function watchedObservations(inner: Observations, t: FleetTick): Observations {
  const { clear } = t.view;
  return {
    present: async (ids: string[], evidence: Evidence) => {
      const due = t.full ? ids : ids.filter((id) => !clear.has(id));
      await inner.present(due, evidence);
      for (const id of due) clear.add(id);
    },
    absent: async (ids: string[], evidence: Evidence, continuityMs: number) => {
      for (const id of ids) clear.delete(id);
      return inner.absent(ids, evidence, continuityMs);
    },
    resetHeartbeat: () => inner.resetHeartbeat(),
  };
}

/** Forgets what this invocation knew of an executor it just declared dead: the next tick reads it in full. */
export function forgetDeclared(t: FleetTick, executorIds: string[]): void {
  for (const id of executorIds) {
    t.view.clear.delete(id);
    t.view.held.delete(id);
  }
}

/** FNV-1a of an ID: which tick's slice it belongs to (also the stuck pass's slices, tick.ts). */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}
