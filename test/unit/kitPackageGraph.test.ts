import { existsSync, readFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The kit package (packages/executor) is compiled from its own src/: the kit (src/runtime) and what it
 * imports. That graph must stay inside the package — never the recovery plane (functions, CLI, reaper,
 * recovery, repair) nor anything else outside it — and at run time use only the package's own dependencies
 * and peers: anything else would be missing in an app, or weigh on it.
 */
/** npm's own range logic (semver ships with npm's tree; no types of its own here). */
const semver = createRequire(import.meta.url)('semver') as {
  valid(v: string): string | null;
  satisfies(v: string, range: string): boolean;
};
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(ROOT, 'packages/executor/package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};
const rootPkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  workspaces: string[];
};

/** Loaded lazily by plane-only code paths the kit never takes (db/pool.ts's Cloud SQL connector pool). */
const PLANE_ONLY_DYNAMIC = new Set(['@google-cloud/cloud-sql-connector']);

function graph(entry: string): { files: string[]; statics: Set<string>; dynamics: Set<string> } {
  const files = new Set<string>();
  const statics = new Set<string>();
  const dynamics = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const src = readFileSync(file, 'utf8');
    for (const m of src.matchAll(/^(?:import|export)\s+(type\s+)?[^'"]*?from\s+'([^']+)'|import\(\s*'([^']+)'\s*\)/gm)) {
      const spec = m[2] ?? m[3];
      if (!spec) continue;
      if (spec.startsWith('.')) {
        let target = resolve(dirname(file), spec).replace(/\.js$/, '.ts');
        if (!existsSync(target)) target = join(target.replace(/\.ts$/, ''), 'index.ts');
        visit(target);
      } else if (!m[1]) {
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] ?? spec);
        (m[3] ? dynamics : statics).add(name);
      }
    }
  };
  visit(entry);
  return { files: [...files].map((f) => relative(ROOT, f)).sort(), statics, dynamics };
}

describe('the kit package’s module graph', () => {
  // Its two entries: the kit, and repair for app code (`afterlife-executor/repair`, issue 28).
  const kit = graph(join(ROOT, 'packages/executor/src/runtime/index.ts'));
  const repair = graph(join(ROOT, 'packages/executor/src/repair/index.ts'));
  const g = {
    files: [...new Set([...kit.files, ...repair.files])].sort(),
    statics: new Set([...kit.statics, ...repair.statics]),
    dynamics: new Set([...kit.dynamics, ...repair.dynamics]),
  };

  it('stays inside its package, never reaching the recovery plane', () => {
    expect(g.files.filter((f) => !f.startsWith('packages/executor/src/'))).toEqual([]);
    expect(g.files).toContain('packages/executor/src/contract/heartbeat.ts');
    expect(g.files).toContain('packages/executor/src/repair/situations/divergedPlan.ts');
  });

  it('imports at run time only its dependencies, its peers and Node built-ins', () => {
    const allowed = new Set([...Object.keys(pkg.dependencies), ...Object.keys(pkg.peerDependencies)]);
    const builtin = (n: string) => n.startsWith('node:') || builtinModules.includes(n);
    expect([...g.statics].filter((n) => !builtin(n) && !allowed.has(n))).toEqual([]);
    expect([...g.dynamics].filter((n) => !builtin(n) && !allowed.has(n) && !PLANE_ONLY_DYNAMIC.has(n))).toEqual([]);
    // The Pub/Sub client library is an optional peer, never a dependency.
    expect(pkg.dependencies['@google-cloud/pubsub']).toBeUndefined();
    expect(pkg.peerDependenciesMeta['@google-cloud/pubsub']?.optional).toBe(true);
  });

  it('declares a library’s ranges, never exact pins, that the versions the repo tests satisfy', () => {
    // An exact pin moves the host app's own copy (issue 28: the app's pg went from 8.11.3 to 8.23.1).
    const declared = { ...pkg.dependencies, ...pkg.peerDependencies };
    for (const [name, range] of Object.entries(declared)) {
      expect(semver.valid(range), `${name}@${range} is an exact pin`).toBeNull();
      const tested = rootPkg.dependencies[name];
      if (tested) expect(semver.satisfies(tested, range), `${name}: the repo tests ${tested}, outside ${range}`).toBe(true);
    }
    // pg comes with DBOS (^8.11.3): the kit uses the app's copy.
    expect(pkg.dependencies.pg).toBeUndefined();
    expect(pkg.peerDependencies.pg).toBeDefined();
    expect(rootPkg.workspaces).toContain('packages/executor');
  });
});
