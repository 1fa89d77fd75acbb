import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The operator's binary is `afterlife-plane` (package.json `bin`); `afterlife` on npm is someone else's
 * package. Every place a command is meant — README, docs, the kits' READMEs, the CLI's usage and output
 * headers — names `afterlife-plane <command>`. Prose where "afterlife" is the subject of a verb that is also
 * a command name ("afterlife logs what happened") is listed by line.
 */
const ROOT = join(import.meta.dirname, '../..');
const COMMANDS = ['status', 'doctor', 'timeline', 'recover', 'reap', 'fork', 'drain', 'retention', 'migrate', 'logs', 'watch'];
const BARE = new RegExp(`(?<![\\w/.@-])afterlife (${COMMANDS.join('|')})\\b`);
/** Prose, not commands. */
const PROSE = ['afterlife logs what happened, not that nothing did.'];

export function bareCommands(text: string): string[] {
  return text.split('\n').filter((l) => BARE.test(l) && !PROSE.some((p) => l.includes(p)));
}

function files(dir: string, ext: RegExp): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && ext.test(d.name))
    .map((d) => join(d.parentPath, d.name));
}

describe('the binary is named afterlife-plane wherever a command is meant', () => {
  it('finds a bare `afterlife <command>` (a planted one)', () => {
    expect(bareCommands('run `afterlife status --json` to see')).toHaveLength(1);
    expect(bareCommands('run `afterlife-plane status --json` to see')).toEqual([]);
    expect(bareCommands('afterlife logs what happened, not that nothing did.')).toEqual([]);
  });

  it('README, docs, the kits’ READMEs and the CLI name afterlife-plane', () => {
    const checked = [
      join(ROOT, 'README.md'),
      join(ROOT, 'CONTRIBUTING.md'),
      join(ROOT, 'packages/executor/README.md'),
      join(ROOT, 'packages/executor-python/README.md'),
      ...files('docs', /\.md$/),
      ...files('cli', /\.ts$/),
    ];
    const found = checked.flatMap((f) => bareCommands(readFileSync(f, 'utf8')).map((l) => `${f.slice(ROOT.length + 1)}: ${l.trim()}`));
    expect(found).toEqual([]);
    expect(checked.length).toBeGreaterThan(20);
  });
});
