import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StatusOutput } from '../../../cli/schemas.js';
import { ConfigError } from '../../../packages/executor/src/errors.js';
import { executorOptionsFromEnv } from '../../../packages/executor/src/runtime/env.js';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { createRedis, waitReady } from '../../../packages/executor/src/lock/redis.js';
import { createRuntime } from '../../../shared/runtime.js';
import { loadConfig } from '../../../shared/config/index.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { kitEnv } from '../../helpers/kit.js';
import { makeTestCa, removeTestCa, startTlsRedis, type TestCa, type TlsRedis } from '../../helpers/tlsRedis.js';

/**
 * Redis over TLS as on Memorystore with SERVER_AUTHENTICATION: a local redis-server that listens only on
 * --tls-port, its certificate signed by a throwaway CA made here with openssl. The functions' runtime,
 * the CLI and the kit connect with rediss:// and REDIS_CA_CERT; without the CA, or with another one,
 * nothing connects.
 */
describe('Redis over TLS', () => {
  let ca: TestCa;
  let other: TestCa;
  let redis: TlsRedis;
  let tdb: TestDatabase;
  let exec: ExecutorHandle | undefined;

  beforeAll(async () => {
    [ca, other] = await Promise.all([makeTestCa(), makeTestCa('some-other-ca')]);
    redis = await startTlsRedis(ca);
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await exec?.stop();
    await redis?.stop();
    await tdb?.drop();
    await removeTestCa(ca);
    await removeTestCa(other);
  });

  it('connects with the CA, and refuses a server the CA did not sign', async () => {
    const good = createRedis(redis.url, { tlsCa: ca.caPem });
    try {
      expect(await waitReady(good, 5_000)).toBe(true);
      await good.set('afterlife-tls:probe', 'ok');
      expect(await good.get('afterlife-tls:probe')).toBe('ok');
    } finally {
      good.disconnect();
    }
    for (const opts of [{ tlsCa: other.caPem }, {}]) {
      const bad = createRedis(redis.url, opts);
      // The handshake's verdict, waited for with a bound rather than a fixed sleep.
      const failed = new Promise<Error>((resolve) => bad.once('error', resolve));
      try {
        let timer: NodeJS.Timeout | undefined;
        const err = await Promise.race([failed, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), 15_000)))]);
        clearTimeout(timer);
        expect(err?.message).toMatch(/self[- ]signed|unable to (get|verify)/i);
        expect(bad.status).not.toBe('ready');
      } finally {
        bad.disconnect();
      }
    }
    // Plain redis:// against the TLS port never gets a PONG either.
    const plain = createRedis(`redis://127.0.0.1:${redis.port}`);
    try {
      expect(await waitReady(plain, 1_000)).toBe(false);
    } finally {
      plain.disconnect();
    }
  });

  it('rejects a CA without TLS, or something that is not PEM, in both configs', () => {
    const base = { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: 'app' };
    expect(() => loadConfig({ ...base, REDIS_URL: `redis://127.0.0.1:${redis.port}`, REDIS_CA_CERT: ca.caPem })).toThrow(
      /REDIS_CA_CERT: is set but REDIS_URL is not a rediss:\/\//,
    );
    expect(() => loadConfig({ ...base, REDIS_URL: redis.url, REDIS_CA_CERT: 'not a certificate' })).toThrow(
      /REDIS_CA_CERT: must hold PEM certificates/,
    );
    expect(() => executorOptionsFromEnv({ DBOS_SYSTEM_DATABASE_URL: tdb.url, REDIS_CA_CERT: ca.caPem })).toThrow(ConfigError);
    expect(executorOptionsFromEnv({ DBOS_SYSTEM_DATABASE_URL: tdb.url, REDIS_URL: redis.url, REDIS_CA_CERT: ca.caPem })).toMatchObject({
      redisUrl: redis.url,
      redisTlsCa: ca.caPem,
    });
  });

  it("the functions' runtime takes the lock over TLS", async () => {
    const rt = await createRuntime({
      env: { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: 'app', REDIS_URL: redis.url, REDIS_CA_CERT: ca.caPem },
      publisher: 'none',
      migrate: false,
    });
    try {
      expect(rt.redis).toBeDefined();
      expect(await waitReady(rt.redis!, 5_000)).toBe(true);
      const out = await rt.lock?.using(uniqueName('afterlife-tls-lock'), 5_000, async (signal) => (signal.aborted ? 'lost' : 'held'));
      expect(out).toBe('held');
    } finally {
      await rt.lifecycle.shutdown();
    }
  });

  it('the CLI reports Redis ok over TLS', async () => {
    const r = await runCli(['status', '--json'], {
      DATABASE_URL: tdb.url,
      DBOS_APPLICATION_NAME: 'app',
      REDIS_URL: redis.url,
      REDIS_CA_CERT: ca.caPem,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(parseJson(r, StatusOutput).redis).toBe('ok');
    const without = await runCli(['status', '--json'], { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: 'app', REDIS_URL: redis.url });
    expect(parseJson(without, StatusOutput).redis).toBe('unavailable');
  });

  it('the kit heart-beats over TLS', async () => {
    const app = uniqueName('tls-app');
    exec = await startExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      applicationVersion: 'v1',
      executorId: uniqueName('tls-exec'),
      env: kitEnv({ env: { REDIS_URL: redis.url, REDIS_CA_CERT: ca.caPem } }),
    });
    expect(exec.kit).toBe(true);
    const probe = createRedis(redis.url, { tlsCa: ca.caPem });
    try {
      const beat = await waitFor('a heartbeat over TLS', async () => probe.get(heartbeatKey(app, exec?.executorId ?? '')));
      expect(JSON.parse(beat)).toMatchObject({ executorId: exec.executorId, state: 'alive' });
    } finally {
      probe.disconnect();
    }
  });
});
