import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * infra/package.sh builds the artefact Terraform zips: the functions, what they share, the kit modules the
 * plane imports, the CLI and the migrations — and nothing of the tests, benchmarks, example app or local stack.
 */
const ROOT = join(import.meta.dirname, '../..');

describe('the deployable package', () => {
  const out = mkdtempSync(join(tmpdir(), 'afterlife-package-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('holds only what is deployed', () => {
    execFileSync('bash', [join(ROOT, 'infra/package.sh'), out], { cwd: ROOT, stdio: 'pipe', timeout: 120_000 });
    const top = readdirSync(join(out, 'dist')).sort();
    expect(top).toEqual(['cli', 'functions', 'packages', 'shared']);
    const files = readdirSync(join(out, 'dist'), { recursive: true }).map(String);
    expect(files.filter((f) => /(^|\/)(test|bench|examples|scripts)(\/|$)|\.test\.js$/.test(f))).toEqual([]);
    expect(files).toContain('functions/index.js');
    expect(files).toContain('cli/index.js');
    expect(files.some((f) => /^shared\/db\/migrations\/0001_.*\.sql$/.test(f))).toBe(true);
    expect(readdirSync(out).sort()).toEqual(['dist', 'package-lock.json', 'package.json']);
  }, 150_000);
});
