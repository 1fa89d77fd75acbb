import { spawn } from 'node:child_process';
import { DBOS } from '@dbos-inc/dbos-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requeuedChannel } from '../../../packages/executor/src/contract/requeued.js';
import { EARLY_POLL_BURST, EARLY_POLLS_PER_S } from '../../../packages/executor/src/runtime/pollNow.js';
import { attachExecutor, type ExecutorKit } from '../../../packages/executor/src/runtime/index.js';
import { type LogLine, memoryLogger } from '../../../packages/executor/src/log.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * Forged "claim it now" notices from a login with no grants, at 100 a second, each naming this kit and every
 * queue it has (20, none with flow control: the most a notice can ask): the kit's early polls stay within the
 * budget docs/threat-model.md states (EARLY_POLL_BURST at once, then EARLY_POLLS_PER_S a second over all
 * queues), and the database transactions it costs with them. The forger is a separate process, so the CPU
 * figure is this process's: DBOS and the kit. DBOS's own polls are set a minute apart, so what is counted is
 * what the notices buy.
 */
const QUEUES = 20;
const RATE_PER_S = 100;
const WINDOW_MS = 4_000;
/** The bound docs/threat-model.md states. */
const BURST = 20;
const PER_S = 2;

describe('executor kit: a stream of forged requeued notices costs a bounded amount', () => {
  let tdb: TestDatabase;
  let kit: ExecutorKit | undefined;
  const app = uniqueName('app-flood');
  const executorId = 'exec-flood';
  const logger = memoryLogger();
  const role = `flood_${process.pid}`;
  const names = Array.from({ length: QUEUES }, (_, i) => `q${i}`);

  beforeAll(async () => {
    tdb = await createTestDatabase();
    DBOS.setConfig({ name: app, systemDatabaseUrl: tdb.url, executorID: executorId, runMigrations: false, logLevel: 'warn' });
    await DBOS.launch();
    for (const name of names) await DBOS.registerQueue(name, { minPollingIntervalMs: 60_000 });
    kit = await attachExecutor({
      env: { REDIS_URL: TEST_REDIS_URL, AFTERLIFE_PUBLISH: 'none' },
      handleSignals: false,
      logger,
      fatal: false,
    });
    await waitFor('liveness lock held', async () => kit?.livenessHeld === true);
    await tdb.sql.query(`DROP ROLE IF EXISTS ${role}`);
    await tdb.sql.query(`CREATE ROLE ${role} LOGIN`);
  }, 30_000);
  afterAll(async () => {
    await kit?.close();
    if (DBOS.isInitialized()) await DBOS.shutdown({ workflowCompletionTimeoutMS: 0 });
    await tdb?.sql.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
    await tdb?.drop();
  });

  /** Committed transactions in the test database so far (everyone's: DBOS, the kit, the forger's NOTIFYs). */
  const commits = async () => {
    const r = await tdb.sql.query<{ n: string }>(`SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()`);
    return Number(r.rows[0]?.n ?? 0);
  };
  const polls = (lines: LogLine[]) =>
    lines.filter((l) => l.event === 'requeued_poll').reduce((n, l) => n + (Array.isArray(l.queues) ? l.queues.length : 0), 0);

  /** A window of WINDOW_MS with `rate` notices a second sent by the no-grant login: polls, commits, CPU. */
  const window = async (rate: number) => {
    const u = new URL(tdb.url);
    u.username = role;
    u.password = '';
    const payload = JSON.stringify({ applicationName: app, applicationVersion: null, queues: names, to: [executorId] });
    const script = `
      const pg = require('pg');
      const c = new pg.Client({ connectionString: process.argv[1] });
      c.connect().then(async () => {
        const denied = await c.query('SELECT 1 FROM afterlife.executors').then(() => false, () => true);
        if (!denied) process.exit(3);
        const rate = Number(process.argv[4]), until = Date.now() + Number(process.argv[5]);
        let sent = 0;
        const t0 = Date.now();
        while (Date.now() < until) {
          const due = Math.floor(((Date.now() - t0) * rate) / 1000);
          while (sent < due) { await c.query('SELECT pg_notify($1, $2)', [process.argv[2], process.argv[3]]); sent++; }
          await new Promise((r) => setTimeout(r, 5));
        }
        console.log(sent);
        await c.end();
      }).catch((e) => { console.error(e.message); process.exit(2); });`;
    const before = { lines: logger.lines.length, commits: await commits(), cpu: process.cpuUsage(), at: Date.now() };
    const forger = spawn(
      process.execPath,
      ['-e', script, u.toString(), requeuedChannel('afterlife'), payload, String(rate), String(WINDOW_MS)],
      { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    forger.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((r) => forger.on('exit', r));
    // The last notices are heard a moment after they are sent.
    await new Promise((r) => setTimeout(r, 200));
    const elapsedS = (Date.now() - before.at) / 1_000;
    const cpu = process.cpuUsage(before.cpu);
    return {
      code,
      sent: Number(out.trim()),
      elapsedS,
      polls: polls(logger.lines.slice(before.lines)),
      commitsPerS: ((await commits()) - before.commits) / elapsedS,
      cpuPct: ((cpu.user + cpu.system) / 1_000 / (elapsedS * 1_000)) * 100,
    };
  };

  it(`100 notices a second naming the kit and all ${QUEUES} queues: at most ${BURST} polls at once, then ${PER_S} a second`, async () => {
    expect([EARLY_POLL_BURST, EARLY_POLLS_PER_S]).toEqual([BURST, PER_S]);
    const quiet = await window(0);
    // The budget is full after the quiet window: the stream may spend the whole burst, then the refill.
    const flood = await window(RATE_PER_S);
    console.log(
      `forged requeued notices: quiet ${JSON.stringify(quiet)}; flood ${JSON.stringify(flood)} ` +
        `(polls/s ${(flood.polls / flood.elapsedS).toFixed(1)})`,
    );
    expect(quiet.code).toBe(0);
    expect(flood.code).toBe(0);
    expect(flood.sent).toBeGreaterThanOrEqual((RATE_PER_S * WINDOW_MS) / 1_000 - 5);
    expect(quiet.polls).toBe(0);
    expect(flood.polls).toBeGreaterThan(0);
    expect(flood.polls).toBeLessThanOrEqual(BURST + Math.ceil(PER_S * flood.elapsedS));
    // A second stream right after: the burst is spent, only the refill is left.
    const again = await window(RATE_PER_S);
    console.log(`forged requeued notices, a second stream: ${JSON.stringify(again)}`);
    expect(again.polls).toBeLessThanOrEqual(Math.ceil(PER_S * again.elapsedS) + 1);
  }, 60_000);
});
