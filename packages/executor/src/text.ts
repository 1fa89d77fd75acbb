import { z } from 'zod';

/**
 * A string Postgres can store in `text`. NUL is the one character it refuses (SQLSTATE 22021), and a
 * refusal at the statement would read as a database failure, retried until the dead-letter topic. Input
 * that can never be stored is bad input: rejected where it is validated, with the field named.
 */
export const NO_NUL = (s: string) => !s.includes('\u0000');

export function pgText(max: number) {
  return z.string().min(1).max(max).refine(NO_NUL, 'must not contain a NUL character');
}
