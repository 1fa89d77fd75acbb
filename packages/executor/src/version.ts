/**
 * The kit's own version and the DBOS versions it supports, as the kit records them at registration and the
 * plane's doctor checks them. Kept equal to packages/executor/package.json's `version` and its
 * `@dbos-inc/dbos-sdk` peer range by test/unit/kitVersion.test.ts: a constant, because the kit is built
 * into several layouts (the root build, the package's own) where a relative path to package.json differs.
 * @module
 */

export const KIT_VERSION = '0.1.0';

/** `@dbos-inc/dbos-sdk` versions the kit and the plane support: at least `min`, below `below`. */
export const SUPPORTED_DBOS = { min: '5.2.11', below: '5.4.0' } as const;

/**
 * DBOS Transact for Python versions the Python kit (packages/executor-python) supports, as its
 * pyproject.toml declares them: from 2.3.0 (the first that names its sessions, the system schema of
 * TypeScript 5.3.0's shared migrations) below 3. Tested with 2.30.0.
 */
export const SUPPORTED_DBOS_PYTHON = { min: '2.3.0', below: '3.0.0' } as const;

/** Which DBOS SDK a kit recorded it runs on (`dbosSdk` in its facts; the TypeScript kit records none). */
export type DbosSdk = 'typescript' | 'python';

/** Plain `major.minor.patch` (a pre-release tag is ignored); undefined when `v` is not one. */
export function parseVersion(v: string): [number, number, number] | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(v.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

function compare(a: [number, number, number], b: [number, number, number]): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/** Whether DBOS version `v` of that SDK is in the supported range (false for anything unparsable). */
export function dbosSupported(v: string, sdk: DbosSdk = 'typescript'): boolean {
  const range = sdk === 'python' ? SUPPORTED_DBOS_PYTHON : SUPPORTED_DBOS;
  const p = parseVersion(v);
  const min = parseVersion(range.min);
  const below = parseVersion(range.below);
  return p !== undefined && min !== undefined && below !== undefined && compare(p, min) >= 0 && compare(p, below) < 0;
}

/** Whether a kit of version `v` speaks the plane's protocol: the same major and minor as the kit the plane was built with. */
export function kitCompatible(v: string): boolean {
  const p = parseVersion(v);
  const mine = parseVersion(KIT_VERSION);
  return p !== undefined && mine !== undefined && p[0] === mine[0] && p[1] === mine[1];
}
