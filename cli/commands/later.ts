import type { CliContext } from '../context.js';
import { type CommandResult, NotAvailableError } from './types.js';

/** Commands whose modules have not shipped in this build yet. */
export async function reap(_ctx: CliContext, _o: { dryRun: boolean }): Promise<CommandResult<unknown>> {
  throw new NotAvailableError('reap is not available in this build (the reaper module is not included)');
}
