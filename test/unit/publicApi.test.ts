import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The public surface, written down: every package entry and the names it exports at run time. Each entry
 * is imported from the build (`npm run build`) through its package.json `exports`, so an export added by
 * accident — an internal re-exported from an index, a new entry — fails here until it is listed on purpose
 * (and documented). Types are not listed: they erase at run time.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const KIT = [
  'ATTACH_FAILED_EXIT_CODE',
  'CLOUD_RUN_GRACE_MS',
  'CallBudgetExhaustedError',
  'DEFAULT_HANDOVER_RESERVE_MS',
  'DEFAULT_HEARTBEAT_INTERVAL_MS',
  'DEFAULT_HEARTBEAT_TTL_MS',
  'DEFAULT_SHUTDOWN_MARGIN_MS',
  'EXECUTOR_ID_MAX',
  'ExecutorIdError',
  'ExecutorIdMetadataError',
  'FENCED_EXIT_CODE',
  'attachExecutor',
  'cloudRunExecutorId',
  'createKitPublisher',
  'executorIdFor',
  'executorOptionsFromEnv',
  'limitCalls',
];

/** What app code needs around afterlife's repairs (docs/repair.md, "In app code"). */
const REPAIR = ['ForkBudgetExhaustedError', 'getResultWithAutoFork', 'getResultWithRepair', 'readStreamWithRepair'];

/** The root package `afterlife`: each entry of its `exports`, and what it exports. */
const AFTERLIFE: Record<string, string[]> = {
  // Registers the functions (executorDeath, reaper, drain) with the functions framework; exports nothing.
  '.': [],
  './executor': KIT,
  './repair': REPAIR,
  './package.json': [],
};

interface Pkg {
  exports: Record<string, string | { default: string }>;
}

const readPkg = (dir: string): Pkg => JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')) as Pkg;
const target = (pkg: Pkg, entry: string): string => {
  const t = pkg.exports[entry];
  if (t === undefined) throw new Error(`no export ${entry}`);
  return typeof t === 'string' ? t : t.default;
};
const keysOf = async (file: string): Promise<string[]> => Object.keys((await import(pathToFileURL(file).href)) as object).sort();

describe('public API', () => {
  const root = readPkg('.');

  it('the afterlife package has exactly the listed entries', () => {
    expect(Object.keys(root.exports).sort()).toEqual(Object.keys(AFTERLIFE).sort());
  });

  for (const [entry, names] of Object.entries(AFTERLIFE).filter(([e]) => e !== './package.json')) {
    it(`afterlife${entry.slice(1)} exports exactly the listed names`, async () => {
      expect(await keysOf(join(ROOT, target(root, entry)))).toEqual([...names].sort());
    });
  }

  it('the kit package (afterlife-executor) has two entries, the kit and repair, both builds exporting exactly the listed names', async () => {
    const kit = readPkg('packages/executor');
    expect(Object.keys(kit.exports).sort()).toEqual(['.', './package.json', './repair']);
    // A dual package (issue 28, tshy): an ES module build under `import`, a CommonJS build under `require`,
    // each with its own declarations, compiled from src/runtime/index.ts (packages/executor/tsconfig.json);
    // the root build emits the same module as dist/packages/executor/src/runtime/index.js. A packed kit's own
    // builds are checked too when present.
    const tsconfig = JSON.parse(readFileSync(join(ROOT, 'packages/executor/tsconfig.json'), 'utf8')) as {
      compilerOptions: { rootDir: string };
      include: string[];
    };
    expect([tsconfig.compilerOptions.rootDir, tsconfig.include]).toEqual(['src', ['src']]);
    expect(kit.exports['.']).toEqual({
      import: { types: './dist/esm/runtime/index.d.ts', default: './dist/esm/runtime/index.js' },
      require: { types: './dist/commonjs/runtime/index.d.ts', default: './dist/commonjs/runtime/index.js' },
    });
    expect(await keysOf(join(ROOT, 'dist/packages/executor/src/runtime/index.js'))).toEqual([...KIT].sort());
    const esm = join(ROOT, 'packages/executor/dist/esm/runtime/index.js');
    if (existsSync(esm)) expect(await keysOf(esm)).toEqual([...KIT].sort());
    const cjs = join(ROOT, 'packages/executor/dist/commonjs/runtime/index.js');
    if (existsSync(cjs)) expect(Object.keys(createRequire(import.meta.url)(cjs) as object).sort()).toEqual([...KIT].sort());
    // Repair for app code (issue 28: installable with the kit, CommonJS and ESM alike).
    expect(kit.exports['./repair']).toEqual({
      import: { types: './dist/esm/repair/index.d.ts', default: './dist/esm/repair/index.js' },
      require: { types: './dist/commonjs/repair/index.d.ts', default: './dist/commonjs/repair/index.js' },
    });
    expect(await keysOf(join(ROOT, 'dist/packages/executor/src/repair/index.js'))).toEqual([...REPAIR].sort());
    const esmRepair = join(ROOT, 'packages/executor/dist/esm/repair/index.js');
    if (existsSync(esmRepair)) expect(await keysOf(esmRepair)).toEqual([...REPAIR].sort());
    const cjsRepair = join(ROOT, 'packages/executor/dist/commonjs/repair/index.js');
    if (existsSync(cjsRepair)) expect(Object.keys(createRequire(import.meta.url)(cjsRepair) as object).sort()).toEqual([...REPAIR].sort());
  });
});
