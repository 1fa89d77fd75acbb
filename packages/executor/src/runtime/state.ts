/**
 * The kit's lifecycle: one phase, changed only through the named transitions below, each of which refuses
 * (returns false, phase unchanged) what the table does not allow. Refusal is the normal answer to a race —
 * a SIGTERM during a planned drain, a fence during a hand-over, a drain asked of a closed kit — so no
 * transition throws; the caller reads the boolean and stands back.
 *
 *   alive                  takes work: claims, drain requests, the superseded sweep
 *   draining               a planned drain: intake stopped, waiting for in-flight work
 *   handing-over           a planned drain: its own death notice is going out
 *   drained                a planned drain is done; the kit idles (or exits)
 *   exiting                a signal owns the exit: waiting for in-flight work within the grace
 *   exiting-handing-over   a signal owns the exit, and the hand-over has begun
 *   fenced                 declared dead by someone else: the process exits at once
 *   closed                 the kit's connections are closed
 *
 * The questions asked of it differ, so each has its own name:
 *
 * - `acceptsWork()` — may the kit start something new (claim re-enqueued work, act on a drain request,
 *   re-enqueue a superseded process's leftovers)? Only while alive.
 * - `connectionsOpen()` — may a chore still use the kit's connections (the watch, the check on a superseded
 *   predecessor's session)? Until close: those chores keep running through a drain, when no new work is taken.
 * - `signalOwnsExit()` — has a SIGTERM/SIGINT taken over the exit? A planned drain that finds one stands back,
 *   whether or not the kit has closed since.
 * - `fence()` succeeding — may a verdict from elsewhere still stop this process? Not once it hands over its
 *   own work: the recovery its notice asks for would otherwise fence the kit that asked.
 * - `state` — what the app and the heartbeat are told; it keeps its last value once fenced or closed.
 * @module
 */
import type { KitState } from './options.js';

export type KitPhase = 'alive' | 'draining' | 'handing-over' | 'drained' | 'exiting' | 'exiting-handing-over' | 'fenced' | 'closed';

export const KIT_PHASES: readonly KitPhase[] = [
  'alive',
  'draining',
  'handing-over',
  'drained',
  'exiting',
  'exiting-handing-over',
  'fenced',
  'closed',
];

/** Every legal move, from → to. Anything else is refused. */
export const KIT_TRANSITIONS: Readonly<Record<KitPhase, readonly KitPhase[]>> = {
  alive: ['draining', 'exiting', 'fenced', 'closed'],
  draining: ['handing-over', 'exiting', 'fenced', 'closed'],
  'handing-over': ['drained', 'exiting-handing-over', 'closed'],
  drained: ['exiting-handing-over', 'closed'],
  exiting: ['exiting-handing-over', 'fenced', 'closed'],
  'exiting-handing-over': ['closed'],
  fenced: ['closed'],
  closed: [],
};

/** What each phase reports as `KitState`; undefined keeps the state reported before (fenced, closed). */
const REPORTED: Readonly<Record<KitPhase, KitState | undefined>> = {
  alive: 'alive',
  draining: 'draining',
  'handing-over': 'draining',
  drained: 'drained',
  exiting: 'exiting',
  'exiting-handing-over': 'exiting',
  fenced: undefined,
  closed: undefined,
};

/** A signal keeps a hand-over that has begun: the kit is already past being fenced. */
const ON_SIGNAL: Readonly<Partial<Record<KitPhase, KitPhase>>> = {
  alive: 'exiting',
  draining: 'exiting',
  'handing-over': 'exiting-handing-over',
  drained: 'exiting-handing-over',
};

const ON_HAND_OVER: Readonly<Partial<Record<KitPhase, KitPhase>>> = {
  draining: 'handing-over',
  exiting: 'exiting-handing-over',
};

export class KitLifecycle {
  private current: KitPhase = 'alive';
  private reported: KitState = 'alive';

  get phase(): KitPhase {
    return this.current;
  }

  get state(): KitState {
    return this.reported;
  }

  acceptsWork(): boolean {
    return this.current === 'alive';
  }

  connectionsOpen(): boolean {
    return this.current !== 'closed';
  }

  signalOwnsExit(): boolean {
    return this.reported === 'exiting';
  }

  /** A planned drain (a drain request, `kit.drain()`) starts: only from alive. */
  beginDrain(): boolean {
    return this.to('draining');
  }

  /** The kit's own death notice is about to go out (a planned drain or a signal). */
  beginHandOver(): boolean {
    return this.to(ON_HAND_OVER[this.current]);
  }

  /** The planned drain handed over; refused when a signal, a fence or a close took over meanwhile. */
  finishDrain(): boolean {
    return this.to('drained');
  }

  /** A first SIGTERM/SIGINT takes over the exit; refused after a fence (that exit is taken) or a close. */
  signal(): boolean {
    return this.to(ON_SIGNAL[this.current]);
  }

  /** Declared dead elsewhere; refused once the kit hands over its own work, and after a close. */
  fence(): boolean {
    return this.to('fenced');
  }

  /** Once: a second close is refused. */
  close(): boolean {
    return this.to('closed');
  }

  private to(next: KitPhase | undefined): boolean {
    if (next === undefined || !KIT_TRANSITIONS[this.current].includes(next)) return false;
    this.current = next;
    this.reported = REPORTED[next] ?? this.reported;
    return true;
  }
}
