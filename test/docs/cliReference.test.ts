import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS, USAGE } from '../../cli/index.js';

/**
 * The operator's reference (docs/operations.md, "Operator CLI") and the CLI's own usage cannot drift from the
 * command table the CLI parses with (cli/index.ts `COMMANDS`): every command has a row and a usage entry, each
 * naming every option the command takes, and the reference lists no command the CLI does not have.
 */
const ROOT = join(import.meta.dirname, '../..');
const ops = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
/** The table's rows: `| \`<command> ...\` | what it does |`. */
const rows = new Map(
  [...ops.matchAll(/^\| `([a-z]+)([^`]*)` \| (.*)\|$/gm)]
    .filter((m) => m[1] !== undefined)
    .map((m) => [m[1] ?? '', `${m[2] ?? ''} ${m[3] ?? ''}`]),
);

describe('the CLI reference follows the command table', () => {
  const commands = Object.keys(COMMANDS);

  it('has a row for every command, naming each of its options, and none for a command that is not there', () => {
    const section = ops.slice(ops.indexOf('| command | what it does |'));
    const documented = [...section.slice(0, section.indexOf('\n\n')).matchAll(/^\| `([a-z]+)/gm)].map((m) => m[1]);
    expect(documented.filter((c) => c !== 'command').sort()).toEqual([...commands].sort());
    for (const [name, options] of Object.entries(COMMANDS)) {
      const row = rows.get(name) ?? '';
      for (const option of Object.keys(options)) expect(row, `docs/operations.md's row for ${name}`).toContain(`--${option}`);
    }
  });

  it('the usage names every command and option', () => {
    for (const [name, options] of Object.entries(COMMANDS)) {
      expect(USAGE).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
      for (const option of Object.keys(options)) expect(USAGE, `usage of ${name}`).toContain(`--${option}`);
    }
  });
});
