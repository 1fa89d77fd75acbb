import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dbosSupported, KIT_VERSION, kitCompatible, SUPPORTED_DBOS, SUPPORTED_DBOS_PYTHON } from '../../packages/executor/src/version.js';

/** The versions the kit records at registration and doctor checks (issue 27) are the package's own. */
describe('the kit version and the supported DBOS range', () => {
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '../../packages/executor/package.json'), 'utf8')) as {
    version: string;
    peerDependencies: Record<string, string>;
  };

  it("equal packages/executor/package.json's version and its DBOS peer range", () => {
    expect(KIT_VERSION).toBe(pkg.version);
    expect(pkg.peerDependencies['@dbos-inc/dbos-sdk']).toBe(`>=${SUPPORTED_DBOS.min} <${SUPPORTED_DBOS.below}`);
    const pyproject = readFileSync(join(import.meta.dirname, '../../packages/executor-python/pyproject.toml'), 'utf8');
    expect(pyproject).toContain(`"dbos>=${SUPPORTED_DBOS_PYTHON.min.replace(/\.0$/, '')},<${SUPPORTED_DBOS_PYTHON.below.split('.')[0]}"`);
  });

  it('judge versions at the edges', () => {
    expect(['5.2.11', '5.3.0', '5.3.9'].map((v) => dbosSupported(v))).toEqual([true, true, true]);
    expect(['5.2.10', '5.4.0', '6.0.0', '5.3', 'latest', '2.30.0'].map((v) => dbosSupported(v))).toEqual([
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
    // The Python kit's DBOS (its pyproject.toml's range).
    expect(['2.3.0', '2.30.0', '2.99.1'].map((v) => dbosSupported(v, 'python'))).toEqual([true, true, true]);
    expect(['2.2.9', '3.0.0', '5.3.0'].map((v) => dbosSupported(v, 'python'))).toEqual([false, false, false]);
    const [major, minor] = KIT_VERSION.split('.');
    expect(kitCompatible(`${major}.${minor}.99`)).toBe(true);
    expect(kitCompatible(`${major}.${Number(minor) + 1}.0`)).toBe(false);
  });
});
