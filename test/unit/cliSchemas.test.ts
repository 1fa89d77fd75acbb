import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import * as schemas from '../../cli/schemas.js';

/**
 * The CLI's --json schemas are strict: the integration tests parse every command's output with them, so
 * a key a command starts printing without the schema knowing fails there. This proves the schemas bite.
 */
const all = Object.entries(schemas as Record<string, unknown>).filter(
  (e): e is [string, z.ZodObject] => typeof (e[1] as { strict?: unknown }).strict === 'function',
);

describe('cli/schemas', () => {
  it('exports the output schema of every command', () => {
    expect(all.map(([name]) => name).sort()).toEqual(
      [
        'DoctorOutput',
        'DrainOutput',
        'ErrorOutput',
        'ExecutorStatus',
        'ForkOutput',
        'MigrateOutput',
        'ReapOutput',
        'RecoverOutput',
        'RecoveryTimesOutput',
        'RetentionOutput',
        'RetentionPolicyOutput',
        'StatusOutput',
        'TimelineFields',
        'TimelineOutput',
      ].sort(),
    );
  });

  it.each(all)('%s rejects a key it does not declare', (_name, schema) => {
    const issues = schema.safeParse({ unexpectedKey: 1 }).error?.issues ?? [];
    expect(issues).toContainEqual(expect.objectContaining({ code: 'unrecognized_keys', keys: ['unexpectedKey'] }));
  });

  it('nested objects are strict too', () => {
    const r = schemas.ErrorOutput.safeParse({ error: { code: 'x', message: 'y', extra: true } });
    expect(r.error?.issues).toContainEqual(expect.objectContaining({ code: 'unrecognized_keys', keys: ['extra'], path: ['error'] }));
  });
});
