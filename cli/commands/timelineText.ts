import { duration, inline } from '../format.js';
import type { TimelineOutput } from '../schemas.js';

type Timeline = TimelineOutput['timeline'];

/** The axis the stages are drawn on, in characters. */
const WIDTH = 40;

/**
 * One death as a person reads it: each stage at its offset from the death, marked on an axis scaled to
 * the last stage, with the gap from the stage before; then the counts and whether it is over.
 */
export function renderTimeline(t: Timeline): string {
  const death = Math.min(Date.parse(t.lastSignOfLifeAt ?? t.declaredAt), Date.parse(t.declaredAt));
  const source = t.lastSignOfLifeSource && t.lastSignOfLifeSource !== 'declaration' ? ` (${t.lastSignOfLifeSource})` : '';
  const stages: Array<[string, string | null]> = [
    [t.lastSignOfLifeAt ? `last sign of life${source}` : 'death (declared)', t.lastSignOfLifeAt ?? t.declaredAt],
    ['declared dead', t.declaredAt],
    ['notice received', t.noticeAt],
    ['first re-enqueued', t.firstReenqueuedAt],
    ['last re-enqueued', t.lastReenqueuedAt],
    ['first step elsewhere', t.firstStepElsewhereAt],
    ['all started elsewhere', t.allStartedAt],
  ];
  const known = stages.filter((s): s is [string, string] => s[1] !== null).map(([name, at]) => ({ name, ms: Date.parse(at) - death, at }));
  const span = Math.max(1, ...known.map((s) => s.ms));
  let previous = 0;
  const rows = known.map((s) => {
    const pos = Math.round((Math.max(0, s.ms) / span) * (WIDTH - 1));
    const axis = `${'─'.repeat(pos)}●${' '.repeat(WIDTH - 1 - pos)}`;
    const gap = s.ms - previous;
    previous = s.ms;
    return `  ${`+${duration(s.ms)}`.padStart(9)}  ${axis}  ${s.name.padEnd(22)} ${s.at}${gap > 0 ? `  (+${duration(gap)})` : ''}`;
  });
  const missing = stages.filter(([, at]) => at === null).map(([name]) => name);
  const c = t.counts;
  return `${[
    `death of ${inline(t.executorId)}${t.incarnation ? ` (incarnation ${inline(t.incarnation)})` : ''}: ${t.cause}; timeline ${t.timelineId}, recoveries #${t.recoveryIds.first}${t.recoveryIds.last !== t.recoveryIds.first ? `–#${t.recoveryIds.last}` : ''}`,
    '',
    ...rows,
    '',
    `moved ${c.reenqueued} workflow(s) in ${c.recoveries} recovery(ies); ${c.started} of ${c.tracked} tracked started elsewhere`,
    ...(missing.length ? [`not (yet) seen: ${missing.join(', ')}`] : []),
    t.state === 'open'
      ? 'open: moved work not all started yet (figures as of now)'
      : `closed ${t.closedAt ?? ''}: ${t.closedBecause ?? ''}`,
  ].join('\n')}\n`;
}
