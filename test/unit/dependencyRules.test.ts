import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The layer rules `npm run lint` runs (.dependency-cruiser.cjs), applied by the real dependency-cruiser to
 * a small tree in a temp directory: clean, it passes; with one wrong import planted per rule, each rule
 * names exactly the import it forbids. So a rule that silently stopped matching (a path pattern gone stale
 * after a move) fails here, not in a review.
 */
const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const bin = join(repo, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const config = join(repo, '.dependency-cruiser.cjs');
const roots: string[] = [];

interface Violation {
  type: string;
  from: string;
  to: string;
  rule: { name: string };
}

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'afterlife-depcruise-'));
  roots.push(root);
  const tsconfig = {
    compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, rootDir: '.' },
    include: ['**/*.ts'],
  };
  writeFileSync(join(root, 'tsconfig.json'), JSON.stringify(tsconfig));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

async function cruise(root: string): Promise<Violation[]> {
  const stdout = await new Promise<string>((done, fail) => {
    execFile(
      process.execPath,
      [bin, '--config', config, '--output-type', 'json', 'shared', 'functions', 'cli', 'packages'],
      { cwd: root, maxBuffer: 32 * 1024 * 1024 },
      // A violation exits non-zero; the JSON on stdout is still the answer. No JSON is a failure.
      (err, out, errOut) => (out.trim().startsWith('{') ? done(out) : fail(err ?? new Error(errOut))),
    );
  });
  return (JSON.parse(stdout) as { summary: { violations: Violation[] } }).summary.violations;
}

/** A tree that respects every direction: entry points on top, the kit's package on itself only. */
const K = 'packages/executor/src';
const CLEAN: Record<string, string> = {
  [`${K}/errors.ts`]: 'export class AfterlifeError extends Error {}\n',
  [`${K}/db/pool.ts`]: "import { AfterlifeError } from '../errors.js';\nexport const pool = AfterlifeError;\n",
  [`${K}/contract/redisTls.ts`]: 'export const ca = 1;\n',
  [`${K}/runtime/core.ts`]: "import { pool } from '../db/pool.js';\nexport const core = pool;\n",
  [`${K}/runtime/env.ts`]: "import { ca } from '../contract/redisTls.js';\nexport const env = ca;\n",
  // The plane imports the common layers and the contract from the kit's package, through its declared entry.
  [`${K}/plane/index.ts`]: "export * from '../db/pool.js';\nexport * from '../contract/redisTls.js';\n",
  'shared/db/queries.ts': "import { pool } from '../../packages/executor/src/plane/index.js';\nexport const queries = pool;\n",
  'shared/config/index.ts': "import { ca } from '../../packages/executor/src/plane/index.js';\nexport const config = ca;\n",
  'shared/reaper/tick.ts': "import { queries } from '../db/queries.js';\nexport const tick = queries;\n",
  'shared/reaper/types.ts': "import type { tick } from './tick.js';\nexport type Tick = typeof tick;\n",
  'shared/reaper/loop.ts': "import type { Tick } from './types.js';\nexport type Loop = Tick;\n",
  'shared/repair/primitives/fork.ts': "import { queries } from '../../db/queries.js';\nexport const fork = queries;\n",
  'shared/repair/situations/stuck.ts': "import { fork } from '../primitives/fork.js';\nexport const stuck = fork;\n",
  'functions/index.ts': "import { tick } from '../shared/reaper/tick.js';\nexport const fn = tick;\n",
  'cli/index.ts': "import { tick } from '../shared/reaper/tick.js';\nexport const cli = tick;\n",
};

/** One wrong import per rule, each in a file of its own so the expected violation is exact. */
const PLANTED: Record<string, string> = {
  'shared/db/usesCli.ts': "import { cli } from '../../cli/index.js';\nexport const x = cli;\n",
  'cli/usesFunction.ts': "import { fn } from '../functions/index.js';\nexport const x = fn;\n",
  'functions/usesCli.ts': "import { cli } from '../cli/index.js';\nexport const x = cli;\n",
  [`${K}/runtime/usesReaper.ts`]: "import { tick } from '../../../../shared/reaper/tick.js';\nexport const x = tick;\n",
  // A common module left in shared/ is outside the package too, a type-only import at that.
  [`${K}/runtime/usesQueries.ts`]:
    "import type { queries } from '../../../../shared/db/queries.js';\nexport const x: typeof queries = 1;\n",
  // The plane's libraries in the kit (issue 28: the kit's footprint): zod and pino, stand-ins installed below.
  [`${K}/runtime/usesZod.ts`]: "import { z } from 'zod';\nexport const x = z;\n",
  [`${K}/runtime/usesPino.ts`]: "import { pino } from 'pino';\nexport const x = pino;\n",
  'node_modules/zod/package.json': '{ "name": "zod", "version": "4.0.0", "main": "index.js" }\n',
  'node_modules/zod/index.js': 'exports.z = {};\n',
  'node_modules/pino/package.json': '{ "name": "pino", "version": "10.0.0", "main": "pino.js" }\n',
  'node_modules/pino/pino.js': 'exports.pino = () => ({});\n',
  // db → reaper while reaper → db: a cycle between folders, none between modules.
  'shared/db/usesReaper.ts': "import { tick } from '../reaper/tick.js';\nexport const x = tick;\n",
  // A repair primitive importing a situation (and so a cycle between the two folders).
  'shared/repair/primitives/usesSituation.ts': "import { stuck } from '../situations/stuck.js';\nexport const x = stuck;\n",
  // The plane past the entry: the kit's runtime, and a common module imported around the entry.
  'shared/reaper/usesKitRuntime.ts': "import { core } from '../../packages/executor/src/runtime/core.js';\nexport const x = core;\n",
  'shared/config/usesKitDirectly.ts': "import { ca } from '../../packages/executor/src/contract/redisTls.js';\nexport const x = ca;\n",
  'shared/lock/a.ts': "import { b } from './b.js';\nexport const a = (): unknown => b;\n",
  'shared/lock/b.ts': "import { a } from './a.js';\nexport const b = (): unknown => a;\n",
};

afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

describe('layer rules (npm run lint)', () => {
  it('pass a tree whose imports follow the layers, type-only cycles included', async () => {
    expect(await cruise(tree(CLEAN))).toEqual([]);
  });

  it('fail each planted wrong import, naming its rule', async () => {
    const found = (await cruise(tree({ ...CLEAN, ...PLANTED }))).map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
    expect(found).toEqual(
      [
        'shared-imports-entry-point: shared/db/usesCli.ts -> cli/index.ts',
        'cli-imports-function: cli/usesFunction.ts -> functions/index.ts',
        'function-imports-cli: functions/usesCli.ts -> cli/index.ts',
        `kit-imports-plane: ${K}/runtime/usesReaper.ts -> shared/reaper/tick.ts`,
        `kit-imports-plane: ${K}/runtime/usesQueries.ts -> shared/db/queries.ts`,
        `kit-imports-plane-library: ${K}/runtime/usesZod.ts -> node_modules/zod/index.js`,
        `kit-imports-plane-library: ${K}/runtime/usesPino.ts -> node_modules/pino/pino.js`,
        'repair-primitive-imports-situation: shared/repair/primitives/usesSituation.ts -> shared/repair/situations/stuck.ts',
        'folder-cycle: shared/repair/primitives -> shared/repair/situations',
        'folder-cycle: shared/repair/situations -> shared/repair/primitives',
        'folder-cycle: shared/db -> shared/reaper',
        'folder-cycle: shared/reaper -> shared/db',
        // The entry point shared/db reaches imports shared/ again: that planted import closes a folder cycle too.
        'folder-cycle: shared/db -> cli',
        // So do the kit's planted imports: shared/ imports the kit's package, which then reaches shared/.
        `folder-cycle: ${K} -> shared/db`,
        `folder-cycle: ${K} -> shared/reaper`,
        `folder-cycle: ${K}/db -> ${K}`,
        `folder-cycle: shared/db -> ${K}/plane`,
        `folder-cycle: ${K}/plane -> ${K}/db`,
        `folder-cycle: ${K}/runtime -> ${K}/db`,
        `folder-cycle: ${K}/runtime -> shared/db`,
        `folder-cycle: ${K}/runtime -> shared/reaper`,
        `folder-cycle: shared/reaper -> ${K}/runtime`,
        // The plane past its entry into the kit's package: the runtime, and a common module around the entry.
        `plane-imports-kit-internals: shared/config/usesKitDirectly.ts -> ${K}/contract/redisTls.ts`,
        `plane-imports-kit-internals: shared/reaper/usesKitRuntime.ts -> ${K}/runtime/core.ts`,
        'module-cycle: shared/lock/a.ts -> shared/lock/b.ts',
      ].sort(),
    );
  });
});
