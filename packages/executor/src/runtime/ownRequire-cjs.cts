/**
 * The CommonJS build's `ownRequire` (tshy uses this file in place of ownRequire.ts there): the module's own
 * `require`, which resolves from the same directory and shares the same module cache.
 */
export const ownRequire: NodeJS.Require = require;
