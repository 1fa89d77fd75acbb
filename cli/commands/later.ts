import type { CliContext } from '../context.js';
import { type CommandResult, NotAvailableError } from './types.js';

/** Commands whose modules (reaper, fork, drain) have not shipped in this build yet. */
export async function reap(_ctx: CliContext, _o: { dryRun: boolean }): Promise<CommandResult<unknown>> {
  throw new NotAvailableError('reap is not available in this build (the reaper module is not included)');
}

export async function fork(_ctx: CliContext, _workflowId: string, _o: { fromStep?: number }): Promise<CommandResult<unknown>> {
  throw new NotAvailableError('fork is not available in this build (the fork module is not included)');
}
