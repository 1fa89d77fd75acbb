import { describe, expect, it } from 'vitest';
import type { Holder, WatchedRow } from '../../shared/db/queries/fleetWatch.js';
import { applyChanges, applyReread, type FleetView } from '../../shared/reaper/fleetView.js';

/**
 * The reaper's view of a fleet brought up to date from what changed (shared/reaper/fleetView.ts), without
 * Postgres: the rows are what readRegistry returns; test/integration/reaper/fleetView.test.ts reads them.
 */
const row = (id: string, o: Partial<WatchedRow> = {}): WatchedRow => ({
  application_name: 'shop',
  executor_id: id,
  application_version: 'v1',
  state: 'alive',
  started_at: null,
  last_seen_at: new Date(0),
  state_changed_at: new Date(0),
  reason: null,
  detected_by: null,
  heartbeats: true,
  liveness: true,
  incarnation: 'inc-1',
  liveness_pid: 100,
  key_hi: '1',
  key_lo: '2',
  holder_usesysid: '10',
  holder_started: '2026-12-06 08:00:00.000001+00',
  changed_xid: '500',
  ...o,
});
const holder = (r: WatchedRow): Holder => ({
  executorId: r.executor_id,
  keyHi: r.key_hi,
  keyLo: r.key_lo,
  pid: r.liveness_pid ?? 0,
  usesysid: r.holder_usesysid,
  started: r.holder_started,
});
const viewOf = (...rows: WatchedRow[]): FleetView => ({
  at: 0,
  live: new Map(rows.map((r) => [r.executor_id, r])),
  horizon: '400',
  held: new Map(rows.map((r) => [r.executor_id, holder(r)])),
  clear: new Set(),
});

describe('fleet view: what changed', () => {
  it('a row seen again with the same stamp is no news: its holder stays', () => {
    const a = row('a');
    const view = viewOf(a);
    expect(applyChanges(view, [row('a')])).toEqual(new Set());
    expect(view.held.has('a')).toBe(true);
  });

  it('a rewritten row replaces the live one and forgets its holder; a dead one leaves; a new one joins', () => {
    const view = viewOf(row('a'), row('b'));
    const changed = applyChanges(view, [
      row('a', { changed_xid: '510', liveness_pid: 101 }),
      row('b', { changed_xid: '511', state: 'dead' }),
      row('c', { changed_xid: '512', state: 'draining' }),
    ]);
    expect(changed).toEqual(new Set(['a', 'b', 'c']));
    expect([...view.live.keys()].sort()).toEqual(['a', 'c']);
    expect(view.live.get('a')?.liveness_pid).toBe(101);
    expect([...view.held.keys()]).toEqual([]);
  });

  it('a row from before the stamp (changed_xid null) is always news', () => {
    const view = viewOf(row('a', { changed_xid: null }));
    expect(applyChanges(view, [row('a', { changed_xid: null })])).toEqual(new Set(['a']));
  });
});

describe('fleet view: remembered holders read again', () => {
  it('keeps an agreeing holder, forgets another session, drops a gone or no longer live row', () => {
    const view = viewOf(row('same'), row('moved'), row('gone'), row('drained'));
    applyReread(
      view,
      ['same', 'moved', 'gone', 'drained'],
      [row('same'), row('moved', { holder_started: '2026-12-06 08:00:05+00' }), row('drained', { state: 'drained' })],
    );
    expect([...view.live.keys()].sort()).toEqual(['moved', 'same']);
    expect([...view.held.keys()]).toEqual(['same']);
  });

  it('a row that names no holder yet (no incarnation or pid) loses the remembered one', () => {
    const view = viewOf(row('a'));
    applyReread(view, ['a'], [row('a', { liveness_pid: null })]);
    expect(view.live.has('a')).toBe(true);
    expect(view.held.has('a')).toBe(false);
  });
});
