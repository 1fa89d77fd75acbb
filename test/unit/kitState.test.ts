import { describe, expect, it } from 'vitest';
import type { KitState } from '../../packages/executor/src/runtime/options.js';
import { KIT_PHASES, KIT_TRANSITIONS, KitLifecycle, type KitPhase } from '../../packages/executor/src/runtime/state.js';

type Move = 'beginDrain' | 'beginHandOver' | 'finishDrain' | 'signal' | 'fence' | 'close';
const MOVES: readonly Move[] = ['beginDrain', 'beginHandOver', 'finishDrain', 'signal', 'fence', 'close'];

/** The named moves that reach each phase from a new kit. */
const PATH: Record<KitPhase, readonly Move[]> = {
  alive: [],
  draining: ['beginDrain'],
  'handing-over': ['beginDrain', 'beginHandOver'],
  drained: ['beginDrain', 'beginHandOver', 'finishDrain'],
  exiting: ['signal'],
  'exiting-handing-over': ['signal', 'beginHandOver'],
  fenced: ['fence'],
  closed: ['close'],
};

function at(phase: KitPhase): KitLifecycle {
  const lc = new KitLifecycle();
  for (const m of PATH[phase]) expect(lc[m](), `${m} on the way to ${phase}`).toBe(true);
  expect(lc.phase).toBe(phase);
  return lc;
}

/** Written out in full, so a change to the machine must change this table too. */
const EXPECTED: Record<Move, Partial<Record<KitPhase, KitPhase>>> = {
  beginDrain: { alive: 'draining' },
  beginHandOver: { draining: 'handing-over', exiting: 'exiting-handing-over' },
  finishDrain: { 'handing-over': 'drained' },
  signal: { alive: 'exiting', draining: 'exiting', 'handing-over': 'exiting-handing-over', drained: 'exiting-handing-over' },
  fence: { alive: 'fenced', draining: 'fenced', exiting: 'fenced' },
  close: {
    alive: 'closed',
    draining: 'closed',
    'handing-over': 'closed',
    drained: 'closed',
    exiting: 'closed',
    'exiting-handing-over': 'closed',
    fenced: 'closed',
  },
};

const REPORTED: Record<KitPhase, KitState> = {
  alive: 'alive',
  draining: 'draining',
  'handing-over': 'draining',
  drained: 'drained',
  exiting: 'exiting',
  'exiting-handing-over': 'exiting',
  fenced: 'alive',
  closed: 'alive',
};

describe('the kit lifecycle (state.ts)', () => {
  for (const move of MOVES) {
    for (const from of KIT_PHASES) {
      const to = EXPECTED[move][from];
      it(`${move} from ${from}: ${to ?? 'refused'}`, () => {
        const lc = at(from);
        const before = lc.state;
        expect(lc[move]()).toBe(to !== undefined);
        expect(lc.phase).toBe(to ?? from);
        if (to === undefined) expect(lc.state).toBe(before);
      });
    }
  }

  it('the table holds exactly the moves the named transitions make: no edge unreachable, none unlisted', () => {
    const made = new Set<string>();
    for (const move of MOVES) for (const [from, to] of Object.entries(EXPECTED[move])) made.add(`${from}→${to}`);
    const listed = new Set(KIT_PHASES.flatMap((from) => KIT_TRANSITIONS[from].map((to) => `${from}→${to}`)));
    expect([...made].sort()).toEqual([...listed].sort());
  });

  it('only an alive kit accepts work; every phase but closed keeps its connections', () => {
    for (const p of KIT_PHASES) {
      expect(at(p).acceptsWork(), p).toBe(p === 'alive');
      expect(at(p).connectionsOpen(), p).toBe(p !== 'closed');
    }
  });

  it('reports the KitState of each phase', () => {
    for (const p of KIT_PHASES) expect(at(p).state, p).toBe(REPORTED[p]);
  });

  it('a fence or a close keeps the state reported before it, and with it who owns the exit', () => {
    const drained = at('drained');
    drained.close();
    expect(drained.state).toBe('drained');
    expect(drained.signalOwnsExit()).toBe(false);

    const exiting = at('exiting');
    exiting.fence();
    expect(exiting.state).toBe('exiting');
    expect(exiting.signalOwnsExit()).toBe(true);
    exiting.close();
    expect(exiting.signalOwnsExit()).toBe(true);

    const draining = at('draining');
    draining.fence();
    expect(draining.state).toBe('draining');
  });

  it('a signal during a planned hand-over takes the exit and keeps the kit past being fenced', () => {
    const lc = at('handing-over');
    expect(lc.signalOwnsExit()).toBe(false);
    expect(lc.signal()).toBe(true);
    expect(lc.signalOwnsExit()).toBe(true);
    expect(lc.fence()).toBe(false);
    expect(lc.finishDrain()).toBe(false);
    expect(lc.phase).toBe('exiting-handing-over');
  });

  it('a second signal is refused: the first one owns the exit', () => {
    const lc = at('exiting');
    expect(lc.signal()).toBe(false);
    expect(lc.signalOwnsExit()).toBe(true);
  });
});
