import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { firstUntraversable } from '../../scripts/stack/postgres.js';

/** What makes embedded Postgres fail as root: a directory on the way to its binaries that others cannot enter. */
describe('firstUntraversable', () => {
  const top = mkdtempSync(join(tmpdir(), 'afterlife-perm-'));
  afterAll(() => rmSync(top, { recursive: true, force: true }));

  it('names the outermost directory without the others-execute bit, and nothing when all have it', async () => {
    const inner = join(top, 'a', 'b');
    mkdirSync(inner, { recursive: true });
    chmodSync(top, 0o755);
    chmodSync(join(top, 'a'), 0o700);
    chmodSync(inner, 0o700);
    expect(await firstUntraversable(inner)).toBe(join(top, 'a'));
    chmodSync(join(top, 'a'), 0o755);
    chmodSync(inner, 0o755);
    expect(await firstUntraversable(inner)).toBeUndefined();
  });
});
