import type { FenceVerdict } from '../liveness/fenceCheck.js';
import { holdExit } from '../lifecycle/shutdown.js';
import type { Logger } from '../log.js';

/**
 * Self-fencing. An executor that learns it was declared dead (or that a recovery moved its workflows) is a
 * zombie: back from a freeze or a partition, its replacement already runs its work. The only safe move is to
 * stop at once — not drain, not record another step — so it exits right away with a code of its own (Cloud
 * Run then starts a fresh instance under a new executor ID). `holdExit()` hands back the real exit even
 * while a SIGTERM path holds functions-framework's.
 */
export const FENCED_EXIT_CODE = 75;

export function fenceNow(log: Logger, verdict: FenceVerdict, exit: (code: number) => void = (code) => holdExit()(code)): void {
  log.error(
    verdict === 'dead'
      ? 'this executor was declared dead and its work handed to others: exiting now, before it runs another step'
      : 'a recovery moved workflows of this executor to others: exiting now, before it runs another step',
    { verdict, exitCode: FENCED_EXIT_CODE, event: 'executor_fenced' },
  );
  exit(FENCED_EXIT_CODE);
}
