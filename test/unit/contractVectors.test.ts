import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeathNotice, deathNoticeAttributes } from '../../packages/executor/src/contract/deathNotice.js';
import { Fence } from '../../packages/executor/src/contract/fenceCheck.js';
import { drainChannel, fenceChannel } from '../../packages/executor/src/contract/fenceChannel.js';
import { REAPER_LEASE_PREFIX, GUARD_TICK_WITHIN_MS } from '../../packages/executor/src/contract/guard.js';
import {
  HeartbeatValue,
  heartbeatIndexKey,
  heartbeatKey,
  indexMarkerKey,
  WRITE_HEARTBEAT_LUA,
} from '../../packages/executor/src/contract/heartbeat.js';
import { HEARTBEAT_BOUNDS } from '../../packages/executor/src/contract/heartbeatBounds.js';
import {
  DEFAULT_LIVENESS_LEASE_MS,
  effectiveLease,
  LIVENESS_FENCE_EVERY_MS,
  LIVENESS_RENEW_EVERY_MS,
  MAX_LIVENESS_LEASE_MS,
  MIN_LIVENESS_LEASE_MS,
} from '../../packages/executor/src/contract/lease.js';
import { LEGACY_LIVENESS_KEY_SQL, LIVENESS_KEY_SQL, takeLivenessSql } from '../../packages/executor/src/contract/livenessKey.js';
import {
  REQUEUED_MAX_QUEUES,
  REQUEUED_NUDGE_TARGETS,
  RequeuedNotice,
  requeuedChannel,
} from '../../packages/executor/src/contract/requeued.js';
import { parseSetting, SETTINGS, type SettingName } from '../../packages/executor/src/contract/settings.js';
import type { Parser } from '../../packages/executor/src/contract/parse.js';
import { fenceCheckQuery } from '../../packages/executor/src/db/queries/liveness.js';
import { FENCED_EXIT_CODE } from '../../packages/executor/src/runtime/fence.js';
import { livenessSessionName } from '../../packages/executor/src/runtime/liveness.js';
import { ADMIN_DATABASE_URL } from '../helpers/services.js';

/**
 * The golden vectors every kit is held to (packages/executor/src/contract/vectors.json): the TypeScript
 * contract computes them here, from its own code — the file is its output, never hand-written — and the
 * Python kit's tests (packages/executor-python/tests/test_contract_vectors.py) read the same file and must
 * produce and accept exactly the same. A change to the contract fails here until the file is regenerated
 * (`AFTERLIFE_WRITE_VECTORS=1 npx vitest run test/unit/contractVectors.test.ts`), and then fails the other
 * kit's tests until that kit follows.
 *
 * The liveness key is computed by Postgres (hashtextextended), as both kits and the plane compute it, so
 * this test asks the server for its values.
 */
const FILE = fileURLToPath(new URL('../../packages/executor/src/contract/vectors.json', import.meta.url));

const LIVENESS_CASES: Array<[string, string]> = [
  ['agent-backend', 'exec-1'],
  ['agent-backend', 'local'],
  // The two IDs whose 32-bit hashtext pair collided (contract/livenessKey.ts): the 64-bit key must not.
  ['agent-backend', 'exec-9863923cd615'],
  ['agent-backend', 'exec-39cac52d2c3c'],
  // The length prefix: these two spell the same text without it.
  ['a:b', 'c'],
  ['a', 'b:c'],
  ['école-agents', 'exécuteur-1'],
  ['应用', '执行器-七'],
  ['agents', 'émoji-🚀-worker'],
  ['agent-backend', 'agent-backend-00042-xyz-0123456789ab'],
];

const SESSION_NAME_CASES: Array<[string, string | undefined]> = [
  ['exec-1', '0a1b2c3d4e5f'],
  ['exec-1', undefined],
  ['agent-backend-00042-xyz-0123456789ab-and-more-text', '0a1b2c3d4e5f'],
];

const HEARTBEAT_KEY_CASES: Array<[string, string, string]> = [
  ['agent-backend', 'exec-1', 'afterlife'],
  ['école-agents', 'exécuteur-1', 'afterlife'],
  ['agents', 'émoji-🚀', 'team_a.prod-1'],
];

const NOW = '2026-12-06T04:20:00.000Z';
const BEAT = {
  executorId: 'exec-1',
  applicationName: 'agent-backend',
  applicationVersion: 'v1',
  state: 'alive',
  startedAt: '2026-12-06T04:19:00.000Z',
  beatAt: NOW,
  inFlight: 2,
  beatEveryMs: 250,
  ttlMs: 15000,
};

const HEARTBEAT_VALUES: unknown[] = [
  BEAT,
  { ...BEAT, state: 'draining', inFlight: 0 },
  { ...BEAT, state: 'drained' },
  // Older kits: no interval, no TTL.
  (({ beatEveryMs: _b, ttlMs: _t, ...rest }) => rest)(BEAT),
  // Unknown fields are dropped.
  { ...BEAT, sdk: 'python' },
  { ...BEAT, state: 'dead' },
  { ...BEAT, inFlight: -1 },
  { ...BEAT, inFlight: 1.5 },
  { ...BEAT, beatEveryMs: 0 },
  { ...BEAT, ttlMs: '15000' },
  (({ applicationVersion: _v, ...rest }) => rest)(BEAT),
  { ...BEAT, executorId: 7 },
  [],
  null,
  'alive',
];

const NOTICE = {
  type: 'executor.dead',
  version: 1,
  executorId: 'exec-1',
  applicationName: 'agent-backend',
  applicationVersions: ['v1'],
  reason: 'sigterm',
  detectedAt: NOW,
  detectedBy: 'afterlife-executor:exec-1',
  incarnation: '0a1b2c3d4e5f',
};

const LONG = 'x'.repeat(511);
const DEATH_NOTICES: unknown[] = [
  NOTICE,
  { ...NOTICE, reason: 'drained' },
  { ...NOTICE, reason: 'heartbeat-lapsed', evidence: 'liveness', staleBeatAt: '2026-12-06T04:19:59.500+00:00' },
  { ...NOTICE, reason: 'manual', force: true },
  (({ applicationVersions: _a, incarnation: _i, ...rest }) => rest)(NOTICE),
  { ...NOTICE, executorId: 'exécuteur-🚀', applicationName: 'école' },
  { ...NOTICE, executorId: `${LONG}y` },
  { ...NOTICE, unknownField: 'dropped' },
  { ...NOTICE, detectedAt: '2028-02-29T00:00:00Z' },
  // Invalid from here on.
  { ...NOTICE, executorId: `${LONG}🚀` },
  { ...NOTICE, executorId: '' },
  { ...NOTICE, executorId: 'a\u0000b' },
  { ...NOTICE, reason: 'crash' },
  { ...NOTICE, version: 2 },
  { ...NOTICE, type: 'executor.alive' },
  { ...NOTICE, detectedAt: '2026-12-06 04:20:00Z' },
  { ...NOTICE, detectedAt: '2026-02-29T00:00:00Z' },
  { ...NOTICE, detectedAt: '2026-12-06T04:20Z' },
  { ...NOTICE, detectedAt: '２０２６-12-06T04:20:00Z' },
  { ...NOTICE, force: 'true' },
  { ...NOTICE, evidence: 'vibes' },
  { ...NOTICE, applicationVersions: 'v1' },
  { ...NOTICE, applicationVersions: [''] },
  { ...NOTICE, incarnation: 'x'.repeat(65) },
  (({ detectedBy: _d, ...rest }) => rest)(NOTICE),
  null,
  [NOTICE],
];

const FENCE_ANSWERS: unknown[] = [
  { verdict: 'dead', reason: 'heartbeat-lapsed', detectedBy: 'reaper', at: '2026-12-06T04:20:00.123456+00:00' },
  { verdict: 'moved', reason: 'crash', detectedBy: 'executor-death', at: '2026-12-06T04:20:00+00:00', moved: 3 },
  { verdict: 'superseded', incarnation: 'ffeeddccbbaa', at: '2026-12-06T04:20:00+00:00' },
  { verdict: 'dead', reason: null, detectedBy: null, at: null },
  { verdict: 'dead', extra: 1 },
  { verdict: 'alive' },
  { verdict: 'moved', moved: 1.5 },
  { verdict: 'moved', moved: '3' },
  { reason: 'crash' },
  null,
];

const REQUEUED: unknown[] = [
  { applicationName: 'agent-backend', applicationVersion: 'v1', queues: ['_dbos_internal_queue', 'agents'], to: ['exec-2', 'exec-3'] },
  { applicationName: 'agent-backend', applicationVersion: null, queues: ['agents'], to: ['exec-2'] },
  { applicationName: 'agent-backend', queues: [], to: [] },
  { applicationName: '', applicationVersion: 'v1', queues: ['agents'], to: ['exec-2'] },
  { applicationName: 'agent-backend', applicationVersion: 'v1', queues: [''], to: ['exec-2'] },
  { applicationName: 'agent-backend', applicationVersion: 'v1', queues: ['agents'], to: ['a', 'b', 'c'] },
  { applicationName: 'agent-backend', applicationVersion: 'v1', queues: Array.from({ length: 21 }, (_, i) => `q${i}`), to: ['a'] },
  { applicationName: 'agent-backend', applicationVersion: 7, queues: ['agents'], to: ['exec-2'] },
  { applicationName: 'agent-backend', applicationVersion: 'v1', queues: 'agents', to: ['exec-2'] },
];

const SETTING_CASES: Array<[SettingName, string]> = [
  ['HEARTBEAT_TTL_MS', '15000'],
  ['HEARTBEAT_TTL_MS', '500'],
  ['HEARTBEAT_TTL_MS', '499'],
  ['HEARTBEAT_TTL_MS', '600000'],
  ['HEARTBEAT_TTL_MS', '600001'],
  ['HEARTBEAT_TTL_MS', '1e3'],
  ['HEARTBEAT_TTL_MS', ' 300'],
  ['HEARTBEAT_TTL_MS', '0300'],
  ['HEARTBEAT_TTL_MS', '+5'],
  ['HEARTBEAT_TTL_MS', '３００'],
  ['HEARTBEAT_INTERVAL_MS', '250'],
  ['HEARTBEAT_INTERVAL_MS', '49'],
  ['HEARTBEAT_INTERVAL_MS', '60000'],
  ['HEARTBEAT_INTERVAL_MS', '60001'],
  ['AFTERLIFE_LIVENESS_LEASE_MS', '8000'],
  ['AFTERLIFE_LIVENESS_LEASE_MS', '2999'],
  ['AFTERLIFE_LIVENESS_LEASE_MS', '300001'],
  ['REDIS_KEY_PREFIX', 'afterlife'],
  ['REDIS_KEY_PREFIX', 'a:b'],
  ['REDIS_KEY_PREFIX', 'a*'],
  ['AFTERLIFE_SCHEMA', 'afterlife'],
  ['AFTERLIFE_SCHEMA', 'after-life'],
  ['DBOS_SYSTEM_SCHEMA', 'dbos'],
  ['REDIS_URL', 'redis://127.0.0.1:6379/0'],
  ['REDIS_URL', 'rediss://user:pw@memorystore:6378'],
  ['REDIS_URL', 'http://127.0.0.1:6379'],
  ['EXECUTOR_DEATH_TOPIC', 'executor-deaths'],
  ['EXECUTOR_DEATH_TOPIC', ' executor-deaths'],
];

const LEASE_CASES: Array<[number, number]> = [
  [8000, 0],
  [8000, 8000],
  [8000, 60000],
  [8000, 5000],
  [8000, 2000],
];

function parsed(p: Parser<unknown>, input: unknown): { input: unknown; valid: true; output: unknown } | { input: unknown; valid: false } {
  const r = p.safeParse(input);
  return r.success ? { input, valid: true, output: r.data } : { input, valid: false };
}

async function build(client: pg.Client): Promise<unknown> {
  const keyRows = [];
  for (const [app, executor] of LIVENESS_CASES) {
    const k = LIVENESS_KEY_SQL.key('$1::text', '$2::text');
    const r = await client.query<{ key: string; classid: string; objid: string; legacy_app: number; legacy_executor: number }>(
      `SELECT (${k})::text AS key, ((${k} >> 32) & 4294967295)::oid::text AS classid, (${k} & 4294967295)::oid::text AS objid,
              ${LEGACY_LIVENESS_KEY_SQL.app('$1::text')} AS legacy_app, ${LEGACY_LIVENESS_KEY_SQL.executor('$2::text')} AS legacy_executor`,
      [app, executor],
    );
    const row = r.rows[0];
    if (!row) throw new Error('no key');
    keyRows.push({ applicationName: app, executorId: executor, key: row.key, classid: row.classid, objid: row.objid });
  }
  const fence = fenceCheckQuery('afterlife', { applicationName: 'a', executorId: 'e', since: new Date(0), incarnation: 'i' });
  return {
    $comment:
      'Golden vectors of the afterlife executor contract. GENERATED by test/unit/contractVectors.test.ts from the TypeScript contract ' +
      '(AFTERLIFE_WRITE_VECTORS=1 npx vitest run test/unit/contractVectors.test.ts); never edit by hand. Every kit (TypeScript, ' +
      'Python: packages/executor-python/tests/test_contract_vectors.py) must produce and accept exactly these. String lengths are ' +
      'UTF-16 code units (JavaScript String.length), the unit the contract counts in.',
    livenessKey: {
      sql: LIVENESS_KEY_SQL.key('$1::text', '$2::text'),
      takeSql: takeLivenessSql('afterlife'),
      cases: keyRows,
      sessionNames: SESSION_NAME_CASES.map(([executorId, incarnation]) => ({
        executorId,
        incarnation: incarnation ?? null,
        name: livenessSessionName(executorId, incarnation),
      })),
    },
    lease: {
      defaultMs: DEFAULT_LIVENESS_LEASE_MS,
      minMs: MIN_LIVENESS_LEASE_MS,
      maxMs: MAX_LIVENESS_LEASE_MS,
      renewEveryMs: LIVENESS_RENEW_EVERY_MS,
      fenceEveryMs: LIVENESS_FENCE_EVERY_MS,
      effective: LEASE_CASES.map(([configuredMs, inheritedMs]) => ({
        configuredMs,
        inheritedMs,
        ...effectiveLease(configuredMs, inheritedMs),
      })),
    },
    heartbeat: {
      keys: HEARTBEAT_KEY_CASES.map(([applicationName, executorId, prefix]) => ({
        applicationName,
        executorId,
        prefix,
        key: heartbeatKey(applicationName, executorId, prefix),
        indexKey: heartbeatIndexKey(applicationName, prefix),
        markerKey: indexMarkerKey(applicationName, prefix),
      })),
      writeLua: WRITE_HEARTBEAT_LUA,
      bounds: HEARTBEAT_BOUNDS,
      values: HEARTBEAT_VALUES.map((v) => parsed(HeartbeatValue, v)),
    },
    settings: {
      bounds: Object.fromEntries(
        Object.entries(SETTINGS)
          .filter(([, s]) => s.kind === 'int')
          .map(([name, s]) => [name, s.kind === 'int' ? { min: s.min, max: s.max, default: s.default } : {}]),
      ),
      cases: SETTING_CASES.map(([name, raw]) => {
        const r = parseSetting(name, raw);
        return r.ok ? { name, raw, ok: true, value: r.value } : { name, raw, ok: false, problem: r.problem };
      }),
    },
    deathNotice: {
      topic: 'executor-deaths',
      reasons: ['sigterm', 'drained', 'heartbeat-lapsed', 'manual'],
      attributes: deathNoticeAttributes(DeathNotice.parse(NOTICE)),
      orderingKey: NOTICE.executorId,
      cases: DEATH_NOTICES.map((n) => parsed(DeathNotice, n)),
    },
    fence: {
      exitCode: FENCED_EXIT_CODE,
      sql: fence.text,
      channels: ['afterlife', 'afterlife_test_0123456789_0123456789_0123456789_0123456789_01'].map((schema) => ({
        schema,
        fence: fenceChannel(schema),
        requeued: requeuedChannel(schema),
        drain: drainChannel(schema),
      })),
      answers: FENCE_ANSWERS.map((a) => parsed(Fence, a)),
    },
    requeued: {
      nudgeTargets: REQUEUED_NUDGE_TARGETS,
      maxQueues: REQUEUED_MAX_QUEUES,
      cases: REQUEUED.map((n) => parsed(RequeuedNotice, n)),
    },
    guard: { leasePrefix: REAPER_LEASE_PREFIX, tickWithinMs: GUARD_TICK_WITHIN_MS },
  };
}

describe('golden contract vectors (contract/vectors.json)', () => {
  let client: pg.Client;
  beforeAll(async () => {
    client = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
    await client.connect();
  });
  afterAll(async () => {
    await client.end();
  });

  it('are exactly what the TypeScript contract produces and accepts', async () => {
    const built = JSON.parse(JSON.stringify(await build(client))) as unknown;
    if (process.env.AFTERLIFE_WRITE_VECTORS === '1') writeFileSync(FILE, `${JSON.stringify(built, null, 2)}\n`);
    const stored = JSON.parse(readFileSync(FILE, 'utf8')) as unknown;
    expect(stored).toEqual(built);
  });

  it('cover both outcomes of every parser, and keys no two cases share', () => {
    const v = JSON.parse(readFileSync(FILE, 'utf8')) as {
      livenessKey: { cases: Array<{ key: string }> };
      heartbeat: { values: Array<{ valid: boolean }> };
      deathNotice: { cases: Array<{ valid: boolean }> };
      fence: { answers: Array<{ valid: boolean }> };
      requeued: { cases: Array<{ valid: boolean }> };
    };
    const keys = v.livenessKey.cases.map((c) => c.key);
    expect(new Set(keys).size).toBe(keys.length);
    for (const list of [v.heartbeat.values, v.deathNotice.cases, v.fence.answers, v.requeued.cases]) {
      expect(list.some((c) => c.valid)).toBe(true);
      expect(list.some((c) => !c.valid)).toBe(true);
    }
  });
});
