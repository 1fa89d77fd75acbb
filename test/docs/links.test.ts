import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { anchors, brokenLinks, githubSlug, markdownFiles } from './markdownLinks.js';

/**
 * Every relative link and #anchor in the Markdown (README.md, docs/, bench/README.md, CHANGELOG.md, the kits'
 * READMEs) resolves, and so does every repository path cited in backticks.
 */
const root = fileURLToPath(new URL('../..', import.meta.url));
const files = markdownFiles(root);

describe('Markdown links', () => {
  it('covers the front door, the manual, the benches and the changelog', () => {
    expect(files).toEqual(expect.arrayContaining(['README.md', 'CHANGELOG.md', 'bench/README.md', 'docs/index.md', 'docs/design.md']));
  });

  it.each(files)('%s: every relative link and #anchor resolves', (file) => {
    expect(brokenLinks(file, readFileSync(`${root}/${file}`, 'utf8'), root)).toEqual([]);
  });

  it('code comments that cite docs/<page>.md#<anchor> point at a heading that exists', () => {
    const cites: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(join(root, dir))) {
        const path = join(dir, name);
        if (statSync(join(root, path)).isDirectory()) walk(path);
        else if (/\.(ts|js|sql|tf|sh)$/.test(name) && !path.startsWith('test/docs/')) {
          for (const m of readFileSync(join(root, path), 'utf8').matchAll(/docs\/[\w/.-]+\.md#[\w-]+/g)) cites.push(`${path}: ${m[0]}`);
        }
      }
    };
    for (const dir of ['shared', 'functions', 'cli', 'scripts', 'bench', 'test', 'infra', 'examples']) walk(dir);
    expect(cites.length).toBeGreaterThan(0);
    const broken = cites.filter((c) => brokenLinks('README.md', `[x](${c.split(': ')[1] ?? ''})`, root).length > 0);
    expect(broken).toEqual([]);
  });

  it("every backticked repository path in the Markdown (the kits' READMEs included) names a file that exists", () => {
    const path =
      /`((?:shared|functions|cli|packages|test|bench|scripts|infra|docs|examples)\/[\w./@-]+\.(?:ts|md|sql|py|tf|sh|json|mjs|cjs|js))`/g;
    const cited = files.flatMap((file) =>
      [...readFileSync(join(root, file), 'utf8').matchAll(path)].map((m) => ({ file, path: m[1] ?? '' })),
    );
    expect(files).toEqual(expect.arrayContaining(['packages/executor/README.md', 'packages/executor-python/README.md']));
    expect(cited.length).toBeGreaterThan(50);
    expect(cited.filter((c) => !existsSync(join(root, c.path)))).toEqual([]);
  });

  it('slugs headings as GitHub does', () => {
    expect(githubSlug('Local stack (`npm start`)'.replace(/`/g, ''))).toBe('local-stack-npm-start');
    expect(githubSlug("recovery — does batching cost more than DBOS's own statement? (bench/recovery.ts)")).toBe(
      'recovery--does-batching-cost-more-than-dboss-own-statement-benchrecoveryts',
    );
    expect(githubSlug('Invariant 3: death only on strong evidence')).toBe('invariant-3-death-only-on-strong-evidence');
    expect([...anchors('# A\n## A\n```\n# not a heading\n```\n## `DB_POOL_MAX`\n')]).toEqual(['a', 'a-1', 'db_pool_max']);
  });

  it('fails on a planted missing file, a missing anchor and a missing anchor on the same page', () => {
    const page =
      '# Page\n\n[ok](docs/index.md) [gone](docs/nowhere.md) [bad](docs/design.md#invariant-99) [self](#page) [selfbad](#nope)\n' +
      '```\n[in code](docs/ignored.md)\n```\n[web](https://example.com/x.md)\n';
    expect(brokenLinks('README.md', page, root).map((b) => b.target)).toEqual(['docs/nowhere.md', 'docs/design.md#invariant-99', '#nope']);
  });
});
