import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packKit } from '../helpers/packKit.js';

/**
 * Every TypeScript or JavaScript sample in README.md, docs/ and the kit's README compiles against the packed
 * kit, as an app imports it: `npm pack` of packages/executor installed into a fresh ESM app beside
 * @dbos-inc/dbos-sdk (from the npm cache), each sample type-checked there by the repo's tsc as TypeScript
 * (strict, `module` nodenext: top-level await, the package's exports map). A sample may say what a reader
 * already has, in an HTML comment on the lines right above its fence:
 *
 *   <!-- sample: context CODE -->   CODE (imports, `declare`s) goes before the sample
 *   <!-- sample: with PATH -->      the repository file PATH sits beside it (its imports are the app's own)
 *   <!-- sample: fragment WHY -->   not compiled (a quotation, a piece of a statement), but counted
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SDK = '5.3.0';
const LANGS = new Set(['ts', 'typescript', 'js', 'javascript', 'mjs', 'cjs', 'tsx']);

interface Sample {
  where: string;
  code: string;
  context: string[];
  with: string[];
  fragment: string | undefined;
}

function markdownFiles(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.md'))
    .map((e) => join(e.parentPath, e.name).slice(ROOT.length));
  return ['README.md', 'packages/executor/README.md', ...docs.sort()];
}

export function samplesOf(file: string, text: string): Sample[] {
  const lines = text.split('\n');
  const out: Sample[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```\s*([A-Za-z]+)\s*$/.exec(lines[i] ?? '');
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && /^\s*```\s*$/.test(l));
    if (end < 0) throw new Error(`${file}:${i + 1}: a fence that never closes`);
    const lang = (open[2] ?? '').toLowerCase();
    if (LANGS.has(lang)) {
      const s: Sample = { where: `${file}:${i + 1}`, code: lines.slice(i + 1, end).join('\n'), context: [], with: [], fragment: undefined };
      for (let j = i - 1; j >= 0 && /^\s*<!--.*-->\s*$/.test(lines[j] ?? ''); j--) {
        const m = /^\s*<!-- sample: (context|with|fragment)\b ?(.*?)\s*-->\s*$/.exec(lines[j] ?? '');
        if (m?.[1] === 'context') s.context.push(m[2] ?? '');
        else if (m?.[1] === 'with') s.with.push(m[2] ?? '');
        else if (m?.[1] === 'fragment') s.fragment = m[2] || 'a fragment';
      }
      out.push(s);
    }
    i = end;
  }
  return out;
}

function run(cmd: string, args: string[], cwd: string, timeoutMs = 300_000): Promise<{ code: number; stdout: string; out: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, out: `${stdout}${stderr}` }),
    );
  });
}

async function npm(args: string[], cwd: string): Promise<string> {
  const r = await run('npm', [...args, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], cwd);
  if (r.code !== 0) throw new Error(`npm ${args.join(' ')} in ${cwd} failed (${r.code}):\n${r.out}`);
  return r.stdout;
}

const repoVersion = (pkg: string) =>
  (JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;

describe('code samples in README.md, docs/ and the kit’s README, against the packed kit', () => {
  let work: string;
  const samples = markdownFiles().flatMap((f) => samplesOf(f, readFileSync(join(ROOT, f), 'utf8')));

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'afterlife-doc-samples-'));
    const tarball = join(work, (await packKit(work)).filename);
    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'doc-samples', version: '0.0.0', private: true, type: 'module' }));
    // The app's own: the SDK and the types an app writing TypeScript has; then the kit, as the docs say.
    await npm(
      ['install', `@dbos-inc/dbos-sdk@${SDK}`, `@types/node@${repoVersion('@types/node')}`, `@types/pg@${repoVersion('@types/pg')}`],
      app,
    );
    await npm(['install', tarball], app);
  }, 600_000);
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('every sample compiles, or is marked a fragment (and counted)', async () => {
    const app = join(work, 'app');
    const compiled: string[] = [];
    const fragments: string[] = [];
    for (const [n, s] of samples.entries()) {
      if (s.fragment !== undefined) {
        fragments.push(`${s.where} ${s.fragment}`);
        continue;
      }
      const dir = join(app, `sample-${n}`);
      mkdirSync(dir);
      for (const path of s.with) copyFileSync(join(ROOT, path), join(dir, basename(path)));
      writeFileSync(join(dir, 'sample.ts'), `${s.context.join('\n')}\n${s.code}\n`);
      compiled.push(s.where);
    }
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          strict: true,
          skipLibCheck: true,
          noEmit: true,
        },
        include: ['sample-*/**/*.ts'],
      }),
    );
    const tsc = await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], app);
    // Each error names its sample's directory: say which document and line it came from.
    const report = tsc.out.replace(/sample-(\d+)\/sample\.ts/g, (_, n: string) => `${samples[Number(n)]?.where ?? n} (sample)`);
    console.log(`[doc samples] ${compiled.length} compiled, ${fragments.length} marked fragments: ${fragments.join('; ')}`);
    expect(tsc.code, `samples that do not compile against the packed kit:\n${report}`).toBe(0);
    expect(compiled.length).toBeGreaterThanOrEqual(6);
  }, 120_000);

  it('no sample imports the kit by a name an app cannot resolve', () => {
    const wrong = samples.filter((s) => /from '[^']*afterlife-plane[^']*'|require\('[^']*afterlife-plane/.test(s.code)).map((s) => s.where);
    expect(wrong).toEqual([]);
  });
});
