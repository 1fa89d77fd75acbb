import { describe, expect, it } from 'vitest';
import { cliLogger } from '../../cli/context.js';

/** The CLI's --verbose logger is the functions' logger: same masking, same error serialisation. */
describe('CLI --verbose logger', () => {
  it("the CLI's --verbose logger masks and serialises errors like the functions' logger", () => {
    const out: string[] = [];
    const log = cliLogger(true, (l) => out.push(l));
    log.debug('connecting', {
      url: 'postgres://u:p@ss@db/x',
      err: Object.assign(new Error('refused by redis://:hunter2@cache'), { code: 'ECONNREFUSED' }),
    });
    expect(out).toHaveLength(1);
    expect(out[0]).not.toMatch(/p@ss|hunter2/);
    expect(JSON.parse(out[0] ?? '')).toMatchObject({ severity: 'DEBUG', err: { name: 'Error', code: 'ECONNREFUSED' } });
  });
});
