import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/globalSetup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Real DBOS executors are child processes; two cores cannot run many files at once.
    maxWorkers: 2,
    fileParallelism: true,
    reporters: ['default'],
    env: { METADATA_SERVER_DETECTION: 'none' },
  },
});
