/** What a command returns: the JSON document (--json), the terminal rendering, and the exit code. */
export interface CommandResult<T> {
  json: T;
  text: string;
  exitCode: 0 | 1;
}

/** Wrong arguments: exit code 2 and the command's usage. */
export class UsageError extends Error {
  override name = 'UsageError';
}
