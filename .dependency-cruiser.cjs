/**
 * The layers' directions, checked by `npm run lint` (docs/development.md, "Layers"). Entry points
 * (functions/, cli/) sit on top and nothing imports them; the executor kit runs inside the user's app, so its
 * package (packages/executor) never imports outside itself; folders of shared/ form no cycle. test/unit/dependencyRules.test.ts
 * plants each wrong import and shows the rule fails.
 */
// The kit's package holds all its code: the kit and the common layers and contract it runs on. The plane
// imports those from the package; the package imports nothing outside itself.
const KIT = '^packages/';
const OUTSIDE_KIT = '^(shared|functions|cli|scripts|bench|test|examples|infra)/';

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
        "The executor kit runs inside the user's app and ships as its own package: it imports nothing outside packages/ (the plane, the common layers left in shared/, scripts, tests), type-only imports included; what it shares with the plane lives in the package and the plane imports it from there.",
      severity: 'error',
      from: { path: KIT },
      to: { path: OUTSIDE_KIT },
    },
    {
      name: 'plane-imports-kit-internals',
      comment:
        "The plane reaches the kit's package through one declared entry (packages/executor/src/plane/: the contract, errors, logging, the pool wrapper, shared DBOS SQL, fault points), never the kit's runtime or any other module of it: a kit refactor is not a plane refactor.",
      severity: 'error',
      from: { path: '^(shared|functions|cli)/' },
      to: { path: '^packages/executor/src/', pathNot: '^packages/executor/src/plane/' },
    },
    {
      name: 'kit-imports-plane-library',
      comment:
        "Issue 28: the kit adds at most 12 packages and 5 MB to an app. zod (8.4 MB) and pino stay the plane's: the kit validates with the contract's own parsers (contract/parse.ts) and logs with its own JSON logger (log.ts).",
      severity: 'error',
      from: { path: KIT },
      to: { path: 'node_modules/(zod|pino|pino-[a-z-]+|@google-cloud/pino-logging-gcp-config)/' },
    },
    {
      name: 'repair-primitive-imports-situation',
      comment:
        'Repair is built from primitives (rewind, fork, the ledger and its budget) that the situations (diverged, stuck, orphaned version) combine, each choosing rewind or fork: a primitive never depends on a situation.',
      severity: 'error',
      // The app-facing pieces live in the kit's package with the same layout (packages/executor/src/repair).
      from: { path: '^(shared|packages/executor/src)/repair/primitives/' },
      to: { path: '^(shared|packages/executor/src)/repair/situations/', reachable: true },
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
    // node_modules is not followed, but stays in the graph, so kit-imports-plane-library can see an import of zod or pino.
    exclude: { path: '(^|/)dist/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
