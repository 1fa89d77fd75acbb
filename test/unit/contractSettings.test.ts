import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CONFIG_KEYS, loadConfig } from '../../shared/config/index.js';
import { ConfigError } from '../../packages/executor/src/errors.js';
import { executorOptionsFromEnv, KIT_ENV_KEYS } from '../../packages/executor/src/runtime/env.js';
import type { DbosApp } from '../../packages/executor/src/runtime/dbosInternals.js';
import { resolveKitOptions } from '../../packages/executor/src/runtime/resolve.js';
import { MAX_TIMER_MS, SETTING_NAMES, SETTINGS, type SettingName } from '../../packages/executor/src/contract/settings.js';

/**
 * Issue 28: the kit and the plane read the same settings through the contract's one parser
 * (packages/executor/src/contract/settings.ts). Every setting, with values outside its bounds and in forms
 * that are not plain decimal, goes through the kit's env reader and the plane's loadConfig; both must refuse
 * it at start with the same message. A setting both read that is not in the contract, or a second schema for
 * one that is, fails here too.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PLANE_BASE = { DBOS_APPLICATION_NAME: 'app', DATABASE_URL: 'postgres://h/db' };
const KIT_BASE = { DBOS_SYSTEM_DATABASE_URL: 'postgres://h/db' };

function refusal(load: () => unknown, name: string): string | undefined {
  try {
    load();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.issues.find((i) => i.startsWith(`${name}: `));
  }
  return undefined;
}

/** Values each setting must refuse: the audit's, non-decimal forms, and one past each bound. */
function badValues(name: SettingName): string[] {
  const s = SETTINGS[name];
  if (s.kind === 'text') return [' x', 'x ', '\t'];
  const out = ['1e3', ' 300', '300 ', '0x3e8', '+500', '3000.0', '-1', String(s.min - 1), String(s.max + 1), String(MAX_TIMER_MS + 1)];
  if (name === 'HEARTBEAT_TTL_MS') out.push('900000');
  if (name === 'HEARTBEAT_INTERVAL_MS') out.push('120000');
  return out;
}

describe('the contract’s settings, through the kit and the plane', () => {
  const plane = new Set(CONFIG_KEYS);

  it('every setting both sides read is the contract’s', () => {
    const both = KIT_ENV_KEYS.filter((k) => plane.has(k)).sort();
    expect(both).toEqual(SETTING_NAMES.filter((n) => plane.has(n)).sort());
    for (const n of SETTING_NAMES) expect(KIT_ENV_KEYS).toContain(n);
  });

  for (const name of SETTING_NAMES) {
    it(`${name}: refused alike by both, accepted alike at its bounds`, () => {
      for (const raw of badValues(name)) {
        const kit = refusal(() => executorOptionsFromEnv({ ...KIT_BASE, [name]: raw }), name);
        expect(kit, `kit accepted ${name}=${JSON.stringify(raw)}`).toBeDefined();
        if (!plane.has(name)) continue;
        const planeMsg = refusal(() => loadConfig({ ...PLANE_BASE, [name]: raw }), name);
        expect(planeMsg, `${name}=${JSON.stringify(raw)}`).toBe(kit);
      }
      const s = SETTINGS[name];
      if (s.kind !== 'int') return;
      expect(s.max).toBeLessThanOrEqual(MAX_TIMER_MS);
      for (const ok of [s.min, s.max, s.default]) {
        expect(refusal(() => executorOptionsFromEnv({ ...KIT_BASE, [name]: String(ok) }), name)).toBeUndefined();
        if (plane.has(name)) expect(refusal(() => loadConfig({ ...PLANE_BASE, [name]: String(ok) }), name)).toBeUndefined();
      }
    });
  }

  it('the audit’s values get the named refusals', () => {
    expect(refusal(() => executorOptionsFromEnv({ HEARTBEAT_TTL_MS: '900000' }), 'HEARTBEAT_TTL_MS')).toMatch(/at most 600000 ms/);
    expect(refusal(() => loadConfig({ ...PLANE_BASE, HEARTBEAT_INTERVAL_MS: '120000' }), 'HEARTBEAT_INTERVAL_MS')).toMatch(
      /at most 60000 ms/,
    );
    expect(refusal(() => executorOptionsFromEnv({ HEARTBEAT_TTL_MS: '1e3' }), 'HEARTBEAT_TTL_MS')).toBe(
      'HEARTBEAT_TTL_MS: must be a plain decimal integer',
    );
  });

  /** The kit's whole resolution (env, then options), as attachExecutor runs it, for a launched app. */
  const app: DbosApp = {
    executorId: 'e',
    applicationVersion: 'v',
    applicationName: 'app',
    config: { systemDatabaseUrl: 'postgres://h/db', systemDatabaseSchemaName: undefined, ownPool: false },
    runningCount: () => 0,
    runningIds: () => new Set(),
    shutdown: async () => undefined,
  };
  const kitRefusal = (env: Record<string, string>, options: { heartbeatTtlMs?: number; heartbeatIntervalMs?: number } = {}) =>
    refusal(() => resolveKitOptions(app, options, { ...KIT_BASE, ...env }), 'HEARTBEAT_TTL_MS');

  it('a TTL shorter than two beats: refused by the kit (env or options) and the plane with the one message', () => {
    const audit = { HEARTBEAT_TTL_MS: '500', HEARTBEAT_INTERVAL_MS: '60000' };
    const kit = kitRefusal(audit);
    expect(kit).toMatch(/^HEARTBEAT_TTL_MS: 500 ms must be at least two beats \(2 × HEARTBEAT_INTERVAL_MS = 120000 ms\)/);
    expect(refusal(() => loadConfig({ ...PLANE_BASE, ...audit }), 'HEARTBEAT_TTL_MS')).toBe(kit);
    expect(kitRefusal({}, { heartbeatTtlMs: 500, heartbeatIntervalMs: 60_000 })).toBe(kit);
    expect(kitRefusal({ HEARTBEAT_INTERVAL_MS: '60000' }, { heartbeatTtlMs: 500 })).toBe(kit);
    // The interval alone at its bound, with the default TTL: the pair is what is judged, on both sides.
    const alone = kitRefusal({ HEARTBEAT_INTERVAL_MS: '60000' });
    expect(alone).toMatch(/HEARTBEAT_TTL_MS: 15000 ms must be at least two beats/);
    expect(refusal(() => loadConfig({ ...PLANE_BASE, HEARTBEAT_INTERVAL_MS: '60000' }), 'HEARTBEAT_TTL_MS')).toBe(alone);
    for (const ok of [
      {} as Record<string, string>,
      { HEARTBEAT_TTL_MS: '120000', HEARTBEAT_INTERVAL_MS: '60000' },
      { HEARTBEAT_TTL_MS: '500', HEARTBEAT_INTERVAL_MS: '250' },
      { HEARTBEAT_TTL_MS: '3000' },
    ] as Record<string, string>[]) {
      expect(kitRefusal(ok), JSON.stringify(ok)).toBeUndefined();
      expect(
        refusal(() => loadConfig({ ...PLANE_BASE, ...ok }), 'HEARTBEAT_TTL_MS'),
        JSON.stringify(ok),
      ).toBeUndefined();
    }
  });

  it('no second definition: outside the contract, a setting’s name is given a schema only through it', () => {
    const files = ['shared', 'functions', 'cli', 'packages/executor/src'].flatMap((d) => sources(join(ROOT, d)));
    const defs = files.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .flatMap((line, i) => {
          const m = /^\s*(?:['"]?)([A-Z][A-Z0-9_]+)(?:['"]?)\s*:\s*(.*)$/.exec(line);
          if (!m?.[1] || !(SETTING_NAMES as string[]).includes(m[1])) return [];
          // The contract itself, the plane's `shared(NAME)` and the kit's readers built from SETTING_NAMES.
          if (f.endsWith('contract/settings.ts') || m[2]?.startsWith(`shared('${m[1]}')`)) return [];
          return [`${f.slice(ROOT.length)}:${i + 1}: ${line.trim()}`];
        }),
    );
    expect(defs, 'a contract setting defined outside packages/executor/src/contract/settings.ts').toEqual([]);
  });
});

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : sources(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [p] : [];
  });
}
