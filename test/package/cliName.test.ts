import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');

/**
 * Issue 27: the operator CLI must work from an app's directory under a name no unrelated registry package
 * answers to (`afterlife` on the registry is someone else's Next.js project: `npx afterlife` from an app
 * offered to install it). The package and its bin are `afterlife-plane`; the docs never send anyone to
 * `npx afterlife` or to a path relative to the checkout; and the checkout, linked the way the docs say, runs
 * from any directory, by name and through npx.
 */
describe('the CLI from an app directory', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('is named afterlife-plane, package and bin, and the docs say so', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; bin: Record<string, string> };
    expect(pkg.name).toBe('afterlife-plane');
    expect(Object.keys(pkg.bin)).toEqual(['afterlife-plane']);
    const pages = ['README.md', 'packages/executor/README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)];
    for (const page of pages.filter((p) => p.endsWith('.md'))) {
      const text = readFileSync(join(ROOT, page), 'utf8');
      // `npx afterlife` is quoted once, in operations.md, as what not to run.
      const npx = [...text.matchAll(/npx afterlife(?!-)/g)].length;
      expect(npx, page).toBeLessThanOrEqual(page === 'docs/operations.md' ? 1 : 0);
      expect(text, page).not.toMatch(/`node dist\/cli\/index\.js/);
    }
  });

  it('runs from any directory once linked: by name, and through npx', { timeout: 120_000 }, async () => {
    const prefix = mkdtempSync(join(tmpdir(), 'afterlife-link-'));
    const app = mkdtempSync(join(tmpdir(), 'afterlife-app-'));
    dirs.push(prefix, app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'some-dbos-app', version: '1.0.0', private: true }));
    const env = { ...process.env, npm_config_prefix: prefix, PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}` };
    await run('npm', ['link', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: ROOT, env });
    const direct = await run('afterlife-plane', [], { cwd: app, env }).catch((e: { stdout: string; stderr: string }) => e);
    expect(`${direct.stdout}${direct.stderr}`).toMatch(/^usage: afterlife-plane <command>/m);
    const viaNpx = await run('npx', ['--no-install', 'afterlife-plane'], { cwd: app, env }).catch(
      (e: { stdout: string; stderr: string }) => e,
    );
    expect(`${viaNpx.stdout}${viaNpx.stderr}`).toMatch(/^usage: afterlife-plane <command>/m);
  });
});
