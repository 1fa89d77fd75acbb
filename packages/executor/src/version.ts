/**
 * The kit's own version and the DBOS versions it supports, as the kit records them at registration and the
 * plane's doctor checks them (issue 27). Kept equal to packages/executor/package.json's `version` and its
 * `@dbos-inc/dbos-sdk` peer range by test/unit/kitVersion.test.ts: a constant, because the kit is built
 * into several layouts (the root build, the package's own) where a relative path to package.json differs.
 */
export const KIT_VERSION = '0.1.0';

/** `@dbos-inc/dbos-sdk` versions the kit and the plane support: at least `min`, below `below`. */
export const SUPPORTED_DBOS = { min: '5.2.11', below: '5.4.0' } as const;

/** Plain `major.minor.patch` (a pre-release tag is ignored); undefined when `v` is not one. */
export function parseVersion(v: string): [number, number, number] | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(v.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

function compare(a: [number, number, number], b: [number, number, number]): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/** Whether DBOS version `v` is in the supported range (false for anything unparsable). */
export function dbosSupported(v: string): boolean {
  const p = parseVersion(v);
  const min = parseVersion(SUPPORTED_DBOS.min);
  const below = parseVersion(SUPPORTED_DBOS.below);
  return p !== undefined && min !== undefined && below !== undefined && compare(p, min) >= 0 && compare(p, below) < 0;
}

/** Whether a kit of version `v` speaks the plane's protocol: the same major and minor as the kit the plane was built with. */
export function kitCompatible(v: string): boolean {
  const p = parseVersion(v);
  const mine = parseVersion(KIT_VERSION);
  return p !== undefined && mine !== undefined && p[0] === mine[0] && p[1] === mine[1];
}
