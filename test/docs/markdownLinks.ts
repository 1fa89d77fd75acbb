import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * Relative links and #anchors in the repository's Markdown, resolved the way GitHub renders them: a link
 * that reaches a missing file or a heading that is not there fails a test instead of a reader. Kept apart
 * from the test so the test can feed it planted breaks.
 */

const SKIP_DIRS = new Set(['node_modules', 'dist', 'build', 'coverage', '.git']);

/** Every .md file under root, except dependencies and build output. */
export function markdownFiles(root: string, dir = root): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (SKIP_DIRS.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...markdownFiles(root, path));
    else if (name.endsWith('.md')) out.push(relative(root, path));
  }
  return out.sort();
}

/** Lines outside fenced code blocks (``` or ~~~), with inline code spans blanked. */
function proseLines(text: string): string[] {
  const out: string[] = [];
  let fence: string | undefined;
  for (const line of text.split('\n')) {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (m?.[1]) {
      const mark = m[1];
      if (fence === undefined) fence = mark[0];
      else if (mark[0] === fence) fence = undefined;
      out.push('');
      continue;
    }
    out.push(fence === undefined ? line.replace(/(`+)[^`]*?\1/g, (s) => ' '.repeat(s.length)) : '');
  }
  return out;
}

/** GitHub's heading slug: lower case, punctuation dropped (letters, digits, `_`, `-` and spaces kept), spaces → `-`. */
export function githubSlug(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link renders as its text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/[*~]/g, '') // emphasis markers
    .replace(/(^|\s)_+|_+(\s|$)/g, '$1$2') // _emphasis_ (an underscore inside a word stays)
    .trim();
  return rendered
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a page offers: its headings' slugs (repeats get -1, -2, …) and explicit `<a id|name="…">`. */
export function anchors(text: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  const fenced = proseLines(text);
  const raw = text.split('\n');
  fenced.forEach((line, i) => {
    const h = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      // Slug from the raw line, so code spans in the heading keep their text.
      const source = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(raw[i] ?? '')?.[1] ?? '';
      const base = githubSlug(source.replace(/`/g, ''));
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) if (m[1]) out.add(m[1]);
  });
  return out;
}

/** Link targets in prose: inline `[text](target "title")`, `<target>`-style, and reference definitions. */
export function linkTargets(text: string): string[] {
  const out: string[] = [];
  for (const line of proseLines(text)) {
    for (const m of line.matchAll(/\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)/g)) if (m[1]) out.push(m[1].replace(/^<|>$/g, ''));
    const def = /^\s{0,3}\[[^\]]+\]:\s*(\S+)/.exec(line);
    if (def?.[1]) out.push(def[1]);
  }
  return out;
}

export interface BrokenLink {
  file: string;
  target: string;
  why: string;
}

/**
 * Broken relative links of one page. `read` returns a repository file's text (or undefined when there is
 * none), so a test can plant pages that are not on disk.
 */
export function brokenLinks(
  file: string,
  text: string,
  root: string,
  read: (path: string) => string | undefined = (p) => readIfFile(root, p),
): BrokenLink[] {
  const out: BrokenLink[] = [];
  for (const target of linkTargets(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto: — not ours to resolve offline
    const [pathPart = '', fragment] = target.split('#', 2);
    const path = decodeURI(pathPart);
    const targetFile = path === '' ? file : relative(root, resolve(root, dirname(file), path));
    if (targetFile.startsWith('..')) {
      out.push({ file, target, why: 'leaves the repository' });
      continue;
    }
    if (path !== '' && !exists(root, targetFile, read)) {
      out.push({ file, target, why: `no such file: ${targetFile}` });
      continue;
    }
    if (fragment === undefined || !targetFile.endsWith('.md')) continue;
    const page = path === '' ? text : read(targetFile);
    if (page === undefined || !anchors(page).has(fragment)) out.push({ file, target, why: `no heading #${fragment} in ${targetFile}` });
  }
  return out;
}

function exists(root: string, path: string, read: (path: string) => string | undefined): boolean {
  return read(path) !== undefined || existsSync(resolve(root, path));
}

function readIfFile(root: string, path: string): string | undefined {
  const abs = resolve(root, path);
  return existsSync(abs) && statSync(abs).isFile() ? readFileSync(abs, 'utf8') : undefined;
}
