import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Proof that scripts/dbos-compat.sh really ran the suites on the DBOS it names: with EXPECT_DBOS_VERSION
 * set, the SDK this process (and the executors it forks) resolves must be that version.
 */
describe('the DBOS SDK under test', () => {
  it.skipIf(!process.env.EXPECT_DBOS_VERSION)('is the version the compat job asked for', () => {
    // package.json is not in the SDK's exports: found from its entry point (dist/src/index.js).
    const entry = createRequire(import.meta.url).resolve('@dbos-inc/dbos-sdk');
    const { version } = JSON.parse(readFileSync(join(dirname(entry), '..', '..', 'package.json'), 'utf8')) as { version: string };
    expect(version).toBe(process.env.EXPECT_DBOS_VERSION);
  });
});
