import { createRequire } from 'node:module';

/**
 * `require` as this module sees it, for reading DBOS's CommonJS module cache and resolving the SDK from the
 * kit's own directory (dbosInternals.ts). The kit is a dual package: this file is the ES module
 * build's; `ownRequire-cjs.cts` replaces it in the CommonJS build (tshy's dialect switch), where
 * `import.meta` is a syntax error and `require` is already there.
 */
export const ownRequire: NodeJS.Require = createRequire(
  // tshy type-checks this file in the CommonJS pass too (TS1470 there), then ships ownRequire-cjs.cts instead.
  // eslint-disable-next-line @typescript-eslint/ban-ts-comment
  // @ts-ignore
  import.meta.url,
);
