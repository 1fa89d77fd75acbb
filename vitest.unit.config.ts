import { defineConfig } from 'vitest/config';

/**
 * The fast tier: pure logic, no Postgres, Redis, emulator or DBOS executor (no globalSetup). Runs in
 * seconds; `npm test` runs it with everything else.
 */
export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts', 'test/docs/**/*.test.ts', 'test/infra/**/*.test.ts'],
    testTimeout: 20_000,
    reporters: ['default'],
    env: { METADATA_SERVER_DETECTION: 'none' },
  },
});
