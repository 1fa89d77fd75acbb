import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CONFIG_KEYS, loadConfig } from '../../shared/config/index.js';
import { ConfigError } from '../../packages/executor/src/errors.js';
import { heartbeatKey, heartbeatPattern } from '../../packages/executor/src/contract/heartbeat.js';
import { nasty, runs } from './arbitraries.js';

/**
 * Generated environments. loadConfig either returns a config whose numbers are the decimal strings it was
 * given and whose key names cannot overlap, or throws a ConfigError that names the variable; never anything
 * else, and never a default in place of a value it did not understand.
 */
const base = { DATABASE_URL: 'postgres://h/db', DBOS_APPLICATION_NAME: 'app', REDIS_URL: 'redis://h' };
const intKeys = ['RECOVERY_BATCH_SIZE', 'DB_POOL_MAX', 'HEARTBEAT_TTL_MS', 'FUNCTION_TIMEOUT_S', 'REAPER_TICK_MS', 'MAX_REPAIRS'] as const;
const numeric = fc.oneof(
  fc.integer({ min: -10, max: 200_000 }).map(String),
  fc.constantFrom('0x10', '1e3', ' 16', '16.0', '+5', '08', '1_000', 'Infinity', 'NaN', ''),
  nasty,
);

function load(env: Record<string, string>) {
  try {
    return { ok: true as const, config: loadConfig({ ...base, ...env }) };
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return { ok: false as const, issues: (err as ConfigError).issues };
  }
}

describe('fuzz: configuration values', () => {
  it('integers: accepted only as plain decimals, and read as exactly that number', () => {
    fc.assert(
      fc.property(fc.constantFrom(...intKeys), numeric, (key, value) => {
        const out = load({ [key]: value });
        if (value === '') return; // empty is how Terraform and shells spell "unset": the default applies
        if (!/^(0|[1-9][0-9]*)$/.test(value)) {
          expect(out.ok, `${key}=${JSON.stringify(value)}`).toBe(false);
          if (!out.ok) expect(out.issues.join('\n')).toContain(key);
        }
        if (out.ok) {
          const c = out.config;
          const read = {
            RECOVERY_BATCH_SIZE: c.recovery.batchSize,
            DB_POOL_MAX: c.database.poolMax,
            HEARTBEAT_TTL_MS: c.heartbeatTtlMs,
            FUNCTION_TIMEOUT_S: c.functionTimeoutS,
            REAPER_TICK_MS: c.reaper.tickMs,
            MAX_REPAIRS: c.repair.maxRepairs,
          }[key];
          expect(read).toBe(Number(value));
        }
      }),
      runs(1_000),
    );
  });

  it('names: two accepted (prefix, application) pairs never produce overlapping keys or patterns', () => {
    const name = fc.oneof(fc.constantFrom('app', 'app-2', 'a', 'af', 'afterlife'), nasty);
    fc.assert(
      fc.property(fc.tuple(name, name), fc.tuple(name, name), ([p1, a1], [p2, a2]) => {
        const one = load({ REDIS_KEY_PREFIX: p1, DBOS_APPLICATION_NAME: a1 });
        const two = load({ REDIS_KEY_PREFIX: p2, DBOS_APPLICATION_NAME: a2 });
        if (!one.ok || !two.ok) return;
        const [c1, c2] = [one.config, two.config];
        if (c1.redis?.keyPrefix === c2.redis?.keyPrefix && c1.applicationName === c2.applicationName) return;
        // Every key of one deployment must stay outside the other's heartbeat scan.
        const key = heartbeatKey(c1.applicationName, 'exec-1', c1.redis?.keyPrefix);
        expect(
          globMatch(heartbeatPattern(c2.applicationName, c2.redis?.keyPrefix), key),
          `${key} matched by ${heartbeatPattern(c2.applicationName, c2.redis?.keyPrefix)}`,
        ).toBe(false);
      }),
      runs(1_000),
    );
  });

  it('any environment of known keys with generated values: a config or a ConfigError, nothing else', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...CONFIG_KEYS), nasty, { maxKeys: 6 }), (env) => {
        load(env);
      }),
      runs(500),
    );
  });
});

/** Redis's glob semantics for MATCH (`*`, `?`, `[...]`, backslash escapes), enough to check a pattern. */
function globMatch(pattern: string, s: string): boolean {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === '\\' && i + 1 < pattern.length) re += escapeRe(pattern[++i] as string);
    else if (c === '*') re += '[\\s\\S]*';
    else if (c === '?') re += '[\\s\\S]';
    else re += escapeRe(c);
  }
  return new RegExp(`^${re}$`).test(s);
}

function escapeRe(c: string): string {
  return c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
