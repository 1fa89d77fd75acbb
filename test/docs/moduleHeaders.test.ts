import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * A doc comment that opens a product module documents the module and says so with `@module`: without the
 * tag, TypeDoc and editors attach it to the next declaration, so the module's description shows up as that
 * constant's. The one exception is a comment on the line right above a declaration, which documents it (a
 * one-function module). `@module` anywhere else is a header that drifted below the imports.
 */
const ROOT = join(import.meta.dirname, '../..');
const PRODUCT = ['shared', 'functions', 'cli', 'packages/executor/src'];

export function moduleHeaderProblems(text: string): string[] {
  const opening = /^\s*(\/\*\*[\s\S]*?\*\/)/.exec(text);
  const problems: string[] = [];
  const rest = opening ? text.slice(opening[0].length) : text;
  const documentsNext = /^\n(export )?(declare |abstract |async )*(const|let|function|class|interface|type|enum)\b/.test(rest);
  if (opening?.[1] && !opening[1].includes('@module') && !documentsNext) problems.push('opening doc comment without @module');
  if (/^\s*\*\s*@module\b/m.test(rest)) problems.push('@module on a comment that does not open the module');
  return problems;
}

function productModules(): string[] {
  return PRODUCT.flatMap((dir) =>
    readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
      .filter((d) => d.isFile() && d.name.endsWith('.ts') && !d.name.endsWith('.d.ts'))
      .map((d) => join(d.parentPath, d.name)),
  );
}

describe('module headers document their module', () => {
  it('finds an untagged opening comment and a tag below the imports (planted)', () => {
    expect(moduleHeaderProblems("/** What this module is for. */\n\nimport x from 'y';\n")).toHaveLength(1);
    expect(moduleHeaderProblems("/** What this module is for. */\nexport * from './y.js';\n")).toHaveLength(1);
    expect(moduleHeaderProblems('/** The constant. */\nexport const x = 1;\n')).toEqual([]);
    expect(moduleHeaderProblems('/**\n * What this module is for.\n * @module\n */\nexport const x = 1;\n')).toEqual([]);
    expect(moduleHeaderProblems("import x from 'y';\n/**\n * Header.\n * @module\n */\nexport const z = x;\n")).toHaveLength(1);
    expect(moduleHeaderProblems("import x from 'y';\n/** The constant. */\nexport const z = x;\n")).toEqual([]);
  });

  it('every product module that opens with a doc comment tags it @module', () => {
    const modules = productModules();
    expect(modules.length).toBeGreaterThan(100);
    const found = modules.flatMap((f) => moduleHeaderProblems(readFileSync(f, 'utf8')).map((p) => `${relative(ROOT, f)}: ${p}`));
    expect(found).toEqual([]);
  });
});
