/**
 * Typed errors. `classify` is the one place that decides whether a failure is worth retrying
 * (nack / 503) or is permanent (ack with a logged reason / 4xx).
 * @module
 */

export type Disposition = 'retry' | 'permanent';

export class AfterlifeError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly disposition: Disposition,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Input that will never become valid: acked with a reason, never retried. */
export class InvalidInputError extends AfterlifeError {
  constructor(
    message: string,
    readonly issues: string[] = [],
  ) {
    super(message, 'invalid_input', 'permanent');
  }
}

export class ConfigError extends AfterlifeError {
  constructor(readonly issues: string[]) {
    super(`invalid configuration:\n  - ${issues.join('\n  - ')}`, 'invalid_config', 'permanent');
  }
}

/** The per-instance DB budget is exhausted: answer "retry later" instead of queueing in the pool. */
export class DbBusyError extends AfterlifeError {
  constructor(
    readonly inUse: number,
    readonly limit: number,
  ) {
    super(`database budget exhausted (${inUse}/${limit} in use); retry later`, 'db_busy', 'retry');
  }
}

export class DbosSchemaError extends AfterlifeError {
  constructor(message: string) {
    super(message, 'dbos_schema', 'retry');
  }
}

/** The work budget ran out at a batch boundary; the rest is left for redelivery or the next tick. */
export class BudgetExhaustedError extends AfterlifeError {
  constructor(what: string) {
    super(`${what}: budget exhausted, the rest is left for the next attempt`, 'budget_exhausted', 'retry');
  }
}

/**
 * A recovery moved what it could and left rows another transaction holds (a host lost inside a
 * transaction keeps its row locks for as long as its session lives). The audit says `partial`; the rows
 * are retried once the lock is gone (a redelivery, or the reaper's next tick that finds them free).
 */
export class RowsLockedError extends AfterlifeError {
  constructor(
    readonly executorId: string,
    readonly workflowIds: string[],
    readonly reenqueued: number,
  ) {
    super(
      `recovery of ${executorId}: ${workflowIds.length} PENDING workflow(s) locked by another transaction, left for a later attempt (${workflowIds.slice(0, 3).join(', ')}${workflowIds.length > 3 ? ', …' : ''})`,
      'rows_locked',
      'retry',
    );
  }
}

/**
 * A heartbeat-lapsed notice whose heartbeat cannot be re-read (Redis configured but not answering). The
 * death was inferred from that heartbeat; acting without the re-check could re-run a live executor's
 * steps, so the notice waits (nack) until Redis can say.
 */
export class HeartbeatUnknownError extends AfterlifeError {
  constructor(executorId: string) {
    super(
      `cannot re-read ${executorId}'s heartbeat (Redis not answering): a heartbeat-lapsed notice waits until it can`,
      'heartbeat_unknown',
      'retry',
    );
  }
}

/** An error's message for a log line or a reason, whatever was thrown. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Only errors we raised on purpose as permanent are acked. Anything unexpected is retried: losing a death
 * notice to a bug costs a stranded fleet, while a redelivery costs nothing (handlers are idempotent) and
 * the subscription's dead-letter policy bounds it.
 */
export function classify(err: unknown): Disposition {
  if (err instanceof AfterlifeError) return err.disposition;
  return 'retry';
}
