import { describe, expect, it } from 'vitest';
import { loadConfig, redactedConfig } from '../../shared/config/index.js';
import { ConfigError } from '../../packages/executor/src/errors.js';

const base = { DATABASE_URL: 'postgres://u:secret@127.0.0.1:5432/db', DBOS_APPLICATION_NAME: 'shop' };

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig(base);
    expect(c).toMatchObject({
      dbosSchema: 'dbos',
      afterlifeSchema: 'afterlife',
      redis: undefined,
      topics: { executorDeaths: 'executor-deaths', deadLetters: 'workflow-dead-letters' },
      heartbeatTtlMs: 15_000,
      database: { kind: 'url', poolMax: 3 },
      recovery: { batchSize: 1_000, orphanedVersionPolicy: 'leave' },
      heartbeatIntervalMs: 250,
      reaper: {
        tickMs: 250,
        leaseMs: 3_000,
        recovery: 'inline',
        livenessEvidence: 'pg_locks',
        livenessSettleMs: 10_000,
        stuckAfterMs: 3_600_000,
        unknownExecutorGraceMs: 600_000,
      },
      repair: { mode: 'rewind', maxRepairs: 3 },
    });
  });

  it('still reads the deprecated MAX_FORKS as MAX_REPAIRS, and refuses the two set to different values', () => {
    expect(loadConfig({ ...base, MAX_FORKS: '5' }).repair.maxRepairs).toBe(5);
    expect(loadConfig({ ...base, MAX_REPAIRS: '4' }).repair.maxRepairs).toBe(4);
    expect(loadConfig({ ...base, MAX_REPAIRS: '4', MAX_FORKS: '4' }).repair.maxRepairs).toBe(4);
    expect(() => loadConfig({ ...base, MAX_FORKS: 'many' })).toThrow(/MAX_REPAIRS/);
    try {
      loadConfig({ ...base, MAX_REPAIRS: '4', MAX_FORKS: '2' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues).toEqual([expect.stringMatching(/^MAX_FORKS: deprecated name of MAX_REPAIRS/)]);
    }
  });

  it("reads DBOS's DBOS_APP_NAME as DBOS_APPLICATION_NAME, and refuses the two set to different values (issue 27)", () => {
    const { DBOS_APPLICATION_NAME: _, ...noName } = base;
    expect(loadConfig({ ...noName, DBOS_APP_NAME: 'starter' }).applicationName).toBe('starter');
    expect(loadConfig({ ...base, DBOS_APP_NAME: 'shop' }).applicationName).toBe('shop');
    try {
      loadConfig({ ...base, DBOS_APP_NAME: 'starter' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues).toEqual([
        'DBOS_APP_NAME: another name of DBOS_APPLICATION_NAME, which is set to another value (DBOS_APPLICATION_NAME=shop, DBOS_APP_NAME=starter); unset one of them',
      ]);
    }
  });

  it('reports every problem at once, naming the variables', () => {
    try {
      loadConfig({ DBOS_SYSTEM_SCHEMA: 'dbos; drop table x', HEARTBEAT_TTL_MS: 'soon', REDIS_URL: 'http://x' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const issues = (err as ConfigError).issues.join('\n');
      for (const key of ['DATABASE_URL', 'DBOS_APPLICATION_NAME', 'DBOS_SYSTEM_SCHEMA', 'HEARTBEAT_TTL_MS', 'REDIS_URL']) {
        expect(issues).toContain(key);
      }
    }
  });

  it('uses the Cloud SQL connector with IAM auth unless a password is given, and never echoes the password', () => {
    const iam = loadConfig({ DBOS_APPLICATION_NAME: 'shop', INSTANCE_CONNECTION_NAME: 'p:r:i', DB_USER: 'sa@p.iam', DB_NAME: 'dbos' });
    expect(iam.database).toMatchObject({ kind: 'connector', iamAuth: true, ipType: 'PRIVATE' });
    const pw = loadConfig({
      DBOS_APPLICATION_NAME: 'shop',
      INSTANCE_CONNECTION_NAME: 'p:r:i',
      DB_USER: 'u',
      DB_NAME: 'd',
      DB_PASSWORD: 'hunter2',
    });
    expect(pw.database).toMatchObject({ iamAuth: false });
    expect(JSON.stringify(redactedConfig(pw))).not.toContain('hunter2');
    expect(() => loadConfig({ DBOS_APPLICATION_NAME: 'shop', INSTANCE_CONNECTION_NAME: 'p:r:i' })).toThrow(/DB_USER.*\n.*DB_NAME|DB_NAME/s);
  });

  it('masks credentials in URLs and treats empty variables as unset', () => {
    const c = loadConfig({ ...base, REDIS_URL: 'redis://:pw@10.0.0.3:6379', AFTERLIFE_SCHEMA: '' });
    expect(c.afterlifeSchema).toBe('afterlife');
    const shown = JSON.stringify(redactedConfig(c));
    expect(shown).not.toContain('secret');
    expect(shown).not.toContain(':pw@');
  });
});
