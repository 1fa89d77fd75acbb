import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_DEFAULTS, CONFIG_KEYS, DEPRECATED_CONFIG_NAMES, loadConfig } from '../../shared/config/index.js';
import { FLOORS } from '../../shared/config/bounds.js';
import { ConfigError } from '../../packages/executor/src/errors.js';

/**
 * The configuration table (docs/configuration.md) is the operators' reference: it must list every variable
 * shared/config reads, with the default the schema really applies, and nothing it does not read.
 */
const page = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');

/** `| `A`, `B` | default | meaning |` rows of the "## Variables" section, by variable. */
function configTable(text: string): Map<string, string> {
  const start = text.indexOf('\n## Variables\n');
  if (start < 0) throw new Error('docs/configuration.md has no "## Variables" section');
  const end = text.indexOf('\n## ', start + 1);
  const rows = new Map<string, string>();
  for (const line of text.slice(start, end < 0 ? undefined : end).split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    // ['', variables, default, meaning, ''] for a table row; skip the header and the separator.
    if (cells.length < 5 || !cells[1]?.startsWith('`')) continue;
    for (const m of (cells[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g)) if (m[1]) rows.set(m[1], cells[2] ?? '');
  }
  return rows;
}

/**
 * Whether loadConfig fails without this key whichever database target is used (DATABASE_URL, or the
 * connector's three): those are alternatives, each required only without the other, so the table shows —.
 */
function required(key: string): boolean {
  const targets: Array<Record<string, string>> = [
    { DATABASE_URL: 'postgres://u@127.0.0.1:5432/d' },
    { INSTANCE_CONNECTION_NAME: 'p:r:i', DB_USER: 'u', DB_NAME: 'd' },
  ];
  return targets.every((target) => {
    const env: Record<string, string> = { ...target, DBOS_APPLICATION_NAME: 'app' };
    delete env[key];
    try {
      loadConfig(env);
      return false;
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      return err.issues.some((i) => i.startsWith(`${key}:`));
    }
  });
}

describe('docs/configuration.md: the configuration table', () => {
  const table = configTable(page);

  it('lists every deprecated name with the variable it stands for', () => {
    const section = page.slice(page.indexOf('\n## Deprecated names\n'));
    for (const [old, key] of Object.entries(DEPRECATED_CONFIG_NAMES)) expect(section).toContain(`| \`${old}\` | \`${key}\` |`);
  });

  it('lists every variable shared/config reads, and only those', () => {
    expect([...table.keys()].sort()).toEqual([...CONFIG_KEYS].sort());
  });

  it.each([...CONFIG_KEYS])('%s: the default shown is the one the schema applies', (key) => {
    const shown = table.get(key);
    const def = CONFIG_DEFAULTS[key];
    if (def !== undefined) expect(shown).toBe(`\`${String(def)}\``);
    else if (required(key)) expect(shown).toBe('**required**');
    else expect(shown).toBe('—');
  });

  it('lists every floor (## Floors) with the value the code applies, and only those', () => {
    const start = page.indexOf('\n## Floors\n');
    expect(start).toBeGreaterThan(0);
    const section = page.slice(start, page.indexOf('\n## ', start + 1));
    const rows = [...section.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \| `(\d+)` \|/gm)].map((m) => `${m[1]}=${m[2]}`);
    expect(rows.sort()).toEqual(FLOORS.map((f) => `${f.variable}=${f.floor}`).sort());
  });

  it('the parser reads the table (a wrong default would be seen)', () => {
    const planted = page.replace('| `HEARTBEAT_TTL_MS` | `15000` |', '| `HEARTBEAT_TTL_MS` | `1500` |');
    expect(planted).not.toBe(page);
    expect(configTable(planted).get('HEARTBEAT_TTL_MS')).toBe('`1500`');
    expect(CONFIG_DEFAULTS.HEARTBEAT_TTL_MS).toBe(15000);
  });
});
