import { type Parser, string } from './contract/parse.js';

/**
 * A string Postgres can store in `text`. NUL is the one character it refuses (SQLSTATE 22021), and a
 * refusal at the statement would read as a database failure, retried until the dead-letter topic. Input
 * that can never be stored is bad input: rejected where it is validated, with the field named.
 */
export const NO_NUL = (s: string) => !s.includes('\u0000');
export const NO_NUL_MESSAGE = 'must not contain a NUL character';

/** A non-empty string of at most `max` characters Postgres can store (the contract's parsers). */
export function pgText(max: number): Parser<string> {
  return string({ min: 1, max, refine: { test: NO_NUL, message: NO_NUL_MESSAGE } });
}
