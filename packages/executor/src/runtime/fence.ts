import type { Fence } from '../contract/fenceCheck.js';
import { holdExit } from '../lifecycle/orderedShutdown.js';
import type { Logger } from '../log.js';

/**
 * Self-fencing. An executor that learns it was declared dead, superseded by a newer process with its ID, or
 * that a recovery moved its workflows is a zombie: back from a freeze or a partition, its replacement already
 * runs its work. The only safe move is to stop at once — not drain, not record another step — so it exits
 * right away with a code of its own; the next process start (same ID or not) is a new incarnation and starts
 * normally. `holdExit()` hands back the real exit even while a SIGTERM path holds functions-framework's.
 */
export const FENCED_EXIT_CODE = 75;

export function fenceNow(
  log: Logger,
  fence: Fence,
  exit: (code: number) => void = (code) => holdExit()(code),
  who: { executorId?: string; incarnation?: string } = {},
): void {
  log.error(`${fenceMessage(fence, who)}: exiting now (code ${FENCED_EXIT_CODE}), before this process runs another step`, {
    verdict: fence.verdict,
    reason: fence.reason ?? undefined,
    detectedBy: fence.detectedBy ?? undefined,
    at: fence.at ?? undefined,
    exitCode: FENCED_EXIT_CODE,
    event: 'executor_fenced',
  });
  exit(FENCED_EXIT_CODE);
}

/**
 * The same exit for a process that stood still longer than its lease allows (stall.ts): it may have been
 * declared dead and replaced while stopped, and it does not wait to ask.
 */
export function stallExitNow(
  log: Logger,
  stoppedMs: number,
  leaseMs: number,
  exit: (code: number) => void = (code) => holdExit()(code),
  who: { executorId?: string; incarnation?: string } = {},
): void {
  log.error(
    `this process${who.executorId ? ` (executor ${who.executorId})` : ''} stood still for ${stoppedMs} ms, longer than its liveness lease ` +
      `(${leaseMs} ms) allows: its session may have ended and its work moved elsewhere, so it exits now (code ${FENCED_EXIT_CODE}), ` +
      `before it runs another step`,
    { stoppedMs, leaseMs, incarnation: who.incarnation, exitCode: FENCED_EXIT_CODE, event: 'executor_stalled' },
  );
  exit(FENCED_EXIT_CODE);
}

/** What really happened, in words an operator can act on. */
export function fenceMessage(f: Fence, who: { executorId?: string; incarnation?: string } = {}): string {
  const self = `this process${who.incarnation ? ` (incarnation ${who.incarnation}` : ''}${who.incarnation && who.executorId ? ` of executor ${who.executorId})` : who.incarnation ? ')' : ''}`;
  const by = f.detectedBy ? ` by ${f.detectedBy}` : '';
  const at = f.at ? ` at ${f.at}` : '';
  switch (f.verdict) {
    case 'superseded':
      return `a newer process started with this executor ID (incarnation ${f.incarnation ?? '?'}${at}); DBOS's launch recovery hands it this executor's work, so ${self} must stop`;
    case 'moved':
      return `a recovery${by}${at} moved ${f.moved ?? 'some'} of this executor's workflows to other executors (reason: ${f.reason ?? 'unknown'}), so ${self} must not run them too`;
    case 'dead':
      return `${self} was declared dead${by}${at}, ${deathCause(f.reason)}; its PENDING workflows are handed to other executors`;
  }
}

function deathCause(reason: string | null | undefined): string {
  switch (reason) {
    case 'heartbeat-lapsed':
      return 'because it was silent for longer than its liveness lease (a freeze, a blocked event loop or a lost network) and its heartbeat went stale';
    case 'manual':
      return 'by an operator (afterlife-plane recover)';
    case 'sigterm':
    case 'drained':
      return `after its own shutdown (${reason})`;
    default:
      return `(reason: ${reason ?? 'unknown'})`;
  }
}
