import { z } from 'zod';
import type { Parser } from '../packages/executor/src/plane/index.js';

/**
 * The contract's parser (packages/executor/src/contract/parse.ts) inside a zod schema, for the plane's
 * boundaries that are zod schemas (a request body with one field the contract defines). The contract stays
 * the one definition: this only carries its verdict and its issues, path for path, into zod's.
 */
export function contractSchema<T>(parser: Parser<T>): z.ZodType<T> {
  return z.unknown().transform((value, ctx) => {
    const r = parser.safeParse(value);
    if (r.success) return r.data;
    for (const issue of r.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
    return z.NEVER;
  }) as unknown as z.ZodType<T>;
}
