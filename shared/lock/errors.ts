import { AfterlifeError, errorMessage } from '../../packages/executor/src/plane/index.js';

/** Someone else holds the lock: the work is in hand elsewhere; retry later (nack). */
export class LockContendedError extends AfterlifeError {
  constructor(readonly resource: string) {
    super(`lock ${resource} is held by another worker`, 'lock_contended', 'retry');
  }
}

/** Redis could not be reached: callers fall back to degraded mode, since Postgres is the authority. */
export class LockUnavailableError extends AfterlifeError {
  constructor(
    readonly resource: string,
    cause: unknown,
  ) {
    super(`redis unavailable for lock ${resource}: ${errorMessage(cause)}`, 'lock_unavailable', 'retry', { cause });
  }
}

/** The lock expired or was taken over while work ran; the signal passed to the work aborts with this. */
export class LockLostError extends AfterlifeError {
  constructor(
    readonly resource: string,
    why: string,
  ) {
    super(`lock ${resource} lost: ${why}`, 'lock_lost', 'retry');
  }
}
