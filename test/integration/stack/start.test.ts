import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PubSub } from '@google-cloud/pubsub';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { embeddedPostgresBlocked } from '../../helpers/postgresServer.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import {
  HttpBridgePublisher,
  type Publisher,
  PubSubPublisher,
  publishDeathNotice,
} from '../../../packages/executor/src/events/publisher.js';
import { accepts } from '../../../scripts/stack/functions.js';
import { emulatorInstalled, PUBSUB_EMULATOR_BIN } from '../../helpers/services.js';
import { uniqueName, waitFor } from '../../helpers/db.js';
import { runStart, START_SCRIPT, type StartedStack } from '../../helpers/stack.js';

/**
 * `npm start` on a fresh setup (no DATABASE_URL → embedded Postgres, no REDIS_URL → a local
 * redis-server) brings the stack up; a death notice published on the local topic reaches the served
 * executorDeath through the Eventarc stand-in and is handled (the recovery audit row, the function's log
 * line); Ctrl-C (SIGTERM here) stops everything it started. Run once through the real emulator and once
 * through the in-process bridge that replaces it on machines without one.
 */
// Every test here starts the stack on an embedded Postgres, which root runs as the `postgres` user.
const blocked = await embeddedPostgresBlocked('npm start on embedded Postgres');
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
    const rows = await sql.query<{ status: string; queue_name: string }>(
      `SELECT status, queue_name FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`,
      [ids],
    );
    expect(rows.rows.every((r) => r.status === 'ENQUEUED' && r.queue_name === '_dbos_internal_queue')).toBe(true);
    await waitFor('the function log line', async () => stack.output.join('').includes('"message":"executor death handled"'), {
      timeoutMs: 5_000,
    });
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

describe.skipIf(blocked)('npm start (the local stack)', () => {
  it.skipIf(!hasEmulator)('embedded Postgres + local Redis + the Pub/Sub emulator: a published death notice is handled', async () => {
    const stack = await runStart(freshEnv({ DBOS_APPLICATION_NAME: uniqueName('start-emu') }));
    stacks.push(stack);
    expect(stack.info.pubsub.kind).toBe('emulator');
    const pubsub = new PubSub({
      projectId: stack.info.project,
      apiEndpoint: stack.info.pubsub.kind === 'emulator' ? stack.info.pubsub.host : '',
    });
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

/** PIDs of live processes whose environment carries this marker: the stack and everything it spawned. */
function processesWith(marker: string): number[] {
  const needle = `AFTERLIFE_TEST_MARKER=${marker}\0`;
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // A zombie's environ reads empty: it is dead, only not yet reaped.
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').includes(needle)) pids.push(Number(entry));
    } catch {
      /* gone meanwhile, or not ours to read */
    }
  }
  return pids;
}

/**
 * Runs `npm start`, sends SIGINT the moment a progress line matches `at` (to the whole process group, as
 * a terminal's Ctrl-C does, or to the script alone, as npm forwarding it does), and checks that nothing it
 * started outlives it: no process carrying the run's marker, no listening port, no embedded data dir.
 * TMPDIR is private to the run, so the data dir check does not see other runs on the machine.
 */
async function interruptWhileStarting(o: {
  at: RegExp;
  group: boolean;
  extraEnv: Record<string, string>;
}): Promise<{ line: string; stderr: string }> {
  const marker = uniqueName('ctrl-c');
  const tmp = mkdtempSync(join(tmpdir(), 'afterlife-start-'));
  // The embedded cluster runs as the `postgres` OS user and must reach its data dir under here.
  chmodSync(tmp, 0o755);
  const child = spawn(process.execPath, [START_SCRIPT, '--json'], {
    env: freshEnv({ ...o.extraEnv, AFTERLIFE_TEST_MARKER: marker, TMPDIR: tmp, DBOS_APPLICATION_NAME: marker }),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const pid = child.pid ?? 0;
  let stdout = '';
  let stderr = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  try {
    const line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no line matching ${o.at} in 30 s:\n${stderr}`)), 30_000);
      child.stderr.on('data', (b: Buffer) => {
        stderr += b.toString();
        const hit = stderr.split('\n').find((l) => o.at.test(l));
        if (hit === undefined) return;
        clearTimeout(timer);
        resolve(hit);
      });
      void exited.then(() => reject(new Error(`npm start exited before ${o.at}:\n${stderr}`)));
    });
    // The marker finds the script and what it has spawned so far: the check below can see a leak.
    expect(processesWith(marker)).toContain(pid);
    process.kill(o.group ? -pid : pid, 'SIGINT');

    const exit = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 30_000))]);
    expect(exit, stderr).toEqual({ code: 0, signal: null });
    expect(stdout, 'interrupted before the stack was up').not.toMatch(/"ready":true/);
    expect(stderr).toMatch(/local stack stopped/);
    expect(stderr).not.toMatch(/npm start failed/);
    // Stopping kills each child's process group after its leader exits; allow the kernel a moment to reap.
    await waitFor('no process of the run left', async () => processesWith(marker).length === 0, { timeoutMs: 3_000 }).catch(
      () => undefined,
    );
    expect(processesWith(marker), stderr).toEqual([]);
    for (const m of stderr.matchAll(/on 127\.0\.0\.1:(\d+)/g)) expect(await accepts(Number(m[1])), m[0]).toBe(false);
    expect(readdirSync(tmp).filter((f) => f.startsWith('afterlife-pg-') || f.startsWith('pg-password-'))).toEqual([]);
    return { line, stderr };
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    for (const p of processesWith(marker)) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    rmSync(tmp, { recursive: true, force: true });
  }
}

describe.skipIf(blocked)('npm start: Ctrl-C while starting stops what was started', () => {
  it('Ctrl-C to the process group as the embedded cluster is being created: no server, no data dir', async () => {
    const { stderr } = await interruptWhileStarting({
      at: /postgres: initialising embedded PostgreSQL/,
      group: true,
      extraEnv: { LOCAL_PUBSUB: 'bridge' },
    });
    expect(stderr).toMatch(/SIGINT: stopping the local stack/);
  });

  it('SIGINT to the script as the first function process is spawned: Postgres, Redis, Pub/Sub and the function all stop', async () => {
    const { line, stderr } = await interruptWhileStarting({
      at: /function \w+: starting functions-framework on/,
      group: false,
      extraEnv: hasEmulator ? {} : { LOCAL_PUBSUB: 'bridge' },
    });
    expect(line).toMatch(/on 127\.0\.0\.1:\d+/);
    // Everything before the function was up by then, so this run had something of every kind to stop.
    expect(stderr).toMatch(/postgres: initialising embedded PostgreSQL/);
    if (hasEmulator) expect(stderr).toMatch(/pub\/sub: starting the emulator/);
  });
});
