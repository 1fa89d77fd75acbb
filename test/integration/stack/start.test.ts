import { existsSync } from 'node:fs';
import { PubSub } from '@google-cloud/pubsub';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { deathNotice } from '../../../shared/events/deathNotice.js';
import { HttpBridgePublisher, type Publisher, PubSubPublisher, publishDeathNotice } from '../../../shared/events/publisher.js';
import { emulatorInstalled, PUBSUB_EMULATOR_BIN } from '../../helpers/services.js';
import { uniqueName, waitFor } from '../../helpers/db.js';
import { runStart, type StartedStack } from '../../helpers/stack.js';

/**
 * Acceptance A: `npm start` on a fresh setup (no DATABASE_URL → embedded Postgres, no REDIS_URL → a local
 * redis-server) brings the stack up; a death notice published on the local topic reaches the served
 * executorDeath through the Eventarc stand-in and is handled (the recovery audit row, the function's log
 * line); Ctrl-C (SIGTERM here) stops everything it started. Run once through the real emulator and once
 * through the in-process bridge that replaces it on machines without one.
 */
const hasEmulator = emulatorInstalled();
if (!hasEmulator) console.warn(`!!! SKIPPED: npm start through the Pub/Sub emulator (not installed at ${PUBSUB_EMULATOR_BIN})`);

const stacks: StartedStack[] = [];
afterAll(async () => {
  await Promise.all(stacks.map((s) => s.kill()));
});

function freshEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, METADATA_SERVER_DETECTION: 'none', ...extra };
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  delete env.PUBSUB_EMULATOR_HOST;
  return env;
}

async function checkStack(stack: StartedStack, publisher: Publisher): Promise<void> {
  const { info } = stack;
  expect(info.postgres).toBe('embedded');
  expect(info.redisUrl).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
  expect(Object.keys(info.functions)).toContain('executorDeath');

  const sql = new pg.Pool({ connectionString: info.databaseUrl, max: 2 });
  sql.on('error', () => undefined);
  try {
    // The embedded database has DBOS's system schema and afterlife's migrations.
    const dbos = await sql.query<{ v: string }>(`SELECT max(version)::text AS v FROM dbos.dbos_migrations`);
    expect(Number(dbos.rows[0]?.v)).toBeGreaterThanOrEqual(123);
    const mig = await sql.query<{ name: string }>(`SELECT name FROM afterlife.migrations ORDER BY id`);
    expect(mig.rows.map((r) => r.name)).toContain('0001_foundation');

    // Three orphans of a dead executor, as DBOS leaves them (PENDING, its executor_id, its version).
    const ids = ['orphan-1', 'orphan-2', 'orphan-3'];
    for (const id of ids) {
      await sql.query(
        `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, queue_name)
         VALUES ($1, 'PENDING', 'agentWorkflow', 'exec-dead', 'v1', $2, NULL)`,
        [id, info.applicationName],
      );
    }

    const t0 = Date.now();
    const messageId = await publishDeathNotice(
      publisher,
      info.deathTopic,
      deathNotice({ executorId: 'exec-dead', applicationName: info.applicationName, reason: 'manual', detectedBy: 'start.test' }),
    );
    const audit = await waitFor(
      'the recovery audit row',
      async () => {
        const r = await sql.query<{ outcome: string; reenqueued: number; message_id: string }>(
          `SELECT outcome, reenqueued, message_id FROM afterlife.recoveries WHERE executor_id = 'exec-dead' AND outcome IS NOT NULL`,
        );
        return r.rows[0];
      },
      { timeoutMs: 15_000 },
    );
    const handledMs = Date.now() - t0;
    expect(audit).toMatchObject({ outcome: 'completed', reenqueued: 3, message_id: messageId });
    const rows = await sql.query<{ status: string; queue_name: string }>(`SELECT status, queue_name FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`, [ids]);
    expect(rows.rows.every((r) => r.status === 'ENQUEUED' && r.queue_name === '_dbos_internal_queue')).toBe(true);
    await waitFor('the function log line', async () => stack.output.join('').includes('"message":"executor death handled"'), { timeoutMs: 5_000 });
    console.info(`npm start (${info.pubsub.kind}): death notice handled ${handledMs} ms after publish`);
  } finally {
    await sql.end();
  }

  // Ctrl-C stops everything it started: the embedded cluster's port closes and its data dir is removed.
  const dataDir = stack.info.postgresDataDir;
  expect(dataDir && existsSync(dataDir)).toBe(true);
  stack.child.kill('SIGINT');
  const exit = await Promise.race([stack.exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 15_000))]);
  expect(exit).toEqual({ code: 0, signal: null });
  const probe = new pg.Client({ connectionString: info.databaseUrl, connectionTimeoutMillis: 1_000 });
  await expect(probe.connect()).rejects.toThrow();
  if (dataDir) expect(existsSync(dataDir)).toBe(false);
  for (const url of Object.values(info.functions)) {
    await expect(fetch(url, { signal: AbortSignal.timeout(1_000) })).rejects.toThrow();
  }
}

describe('npm start (the local stack)', () => {
  it.skipIf(!hasEmulator)('embedded Postgres + local Redis + the Pub/Sub emulator: a published death notice is handled', async () => {
    const stack = await runStart(freshEnv({ DBOS_APPLICATION_NAME: uniqueName('start-emu') }));
    stacks.push(stack);
    expect(stack.info.pubsub.kind).toBe('emulator');
    const pubsub = new PubSub({ projectId: stack.info.project, apiEndpoint: stack.info.pubsub.kind === 'emulator' ? stack.info.pubsub.host : '' });
    try {
      await checkStack(stack, new PubSubPublisher(pubsub));
    } finally {
      await pubsub.close();
    }
  });

  it('without an emulator: the in-process bridge delivers a death notice published over HTTP', async () => {
    const stack = await runStart(freshEnv({ LOCAL_PUBSUB: 'bridge' }));
    stacks.push(stack);
    // DBOS_APPLICATION_NAME unset: the local default is used and printed.
    expect(stack.info.applicationName).toBe('demo');
    expect(stack.info.pubsub.kind).toBe('bridge');
    const url = stack.info.pubsub.kind === 'bridge' ? stack.info.pubsub.url : '';
    await checkStack(stack, new HttpBridgePublisher(url, stack.info.project));
  });
});
