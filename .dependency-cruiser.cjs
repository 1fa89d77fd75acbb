/**
 * The layers' directions, checked by `npm run lint` (docs/development.md, "Layers"). Entry points
 * (functions/, cli/) sit on top and nothing imports them; the executor kit runs inside the user's app, so it
 * never reaches the recovery plane; folders of shared/ form no cycle. test/unit/dependencyRules.test.ts
 * plants each wrong import and shows the rule fails.
 */
const KIT = '^(shared/executor|packages)/';
// config/redisTls.ts is the one piece of config/ both configurations validate with (the kit's REDIS_CA_CERT).
const PLANE_ONLY =
  '^(shared/(reaper|recovery|repair|retention|drain)/|shared/config/(?!redisTls\\.ts$)|shared/runtime\\.ts$|functions/|cli/)';

module.exports = {
  forbidden: [
    {
      name: 'shared-imports-entry-point',
      comment: 'functions/ and cli/ are entry points: shared code is built from below, never from them.',
      severity: 'error',
      from: { path: '^(shared|packages)/' },
      to: { path: '^(functions|cli)/' },
    },
    {
      name: 'cli-imports-function',
      comment: 'The CLI and the functions are siblings: what both need lives in shared/.',
      severity: 'error',
      from: { path: '^cli/' },
      to: { path: '^functions/' },
    },
    {
      name: 'function-imports-cli',
      comment: 'The CLI and the functions are siblings: what both need lives in shared/.',
      severity: 'error',
      from: { path: '^functions/' },
      to: { path: '^cli/' },
    },
    {
      name: 'kit-imports-plane',
      comment:
        "The executor kit runs inside the user's app: it must not pull in the reaper, recovery, repair, retention, drain, the plane's config or runtime, the functions or the CLI, not even through a common module (reachable), type-only imports included.",
      severity: 'error',
      from: { path: KIT },
      to: { path: PLANE_ONLY, reachable: true },
    },
    {
      name: 'repair-primitive-imports-situation',
      comment:
        'Repair is built from primitives (rewind, fork, the ledger and its budget) that the situations (diverged, stuck, orphaned version) combine, each choosing rewind or fork: a primitive never depends on a situation.',
      severity: 'error',
      from: { path: '^shared/repair/primitives/' },
      to: { path: '^shared/repair/situations/', reachable: true },
    },
    {
      name: 'folder-cycle',
      comment: 'Folders of shared/ are layers: a cycle between two means a piece belongs lower down.',
      severity: 'error',
      scope: 'folder',
      from: { path: '^(shared|packages)/' },
      to: { circular: true },
    },
    {
      name: 'module-cycle',
      comment: 'No runtime import cycle between modules (a type-only one erases at compile time).',
      severity: 'error',
      from: { path: '^(shared|packages|functions|cli)/' },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
