import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../helpers/cli.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';

/**
 * Issue 23, observation 7: an executor ID with a newline, a fake JSON line and `ESC[31m` (stored from a
 * forged notice, or written by any process as DBOS's executor_id) reached the terminal raw through
 * `afterlife-plane status`. Every human output escapes control characters; `--json` stays exact.
 */
const EVIL = 'exec-evil\n{"level":"info","msg":"all good"}\n\u001b[31mRED\u001b[0m\r\u0007\u009b2J\u202eLTR';

describe('terminal escapes in human output', () => {
  let tdb: TestDatabase;
  const app = uniqueName('trust-tty');
  let env: Record<string, string>;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    env = { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app, REDIS_URL: '' };
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name)
       VALUES ('evil-1', 'PENDING', 'agentWorkflow', $1, $2, $3)`,
      [EVIL, `v1\u001b[2J`, app],
    );
    await tdb.sql.query(
      `INSERT INTO afterlife.executors (application_name, executor_id, application_version, state, reason, detected_by)
       VALUES ($1, $2, 'v1', 'dead', 'manual', $3)`,
      [app, EVIL, `reaper\u001b]0;owned\u0007`],
    );
    await tdb.sql.query(
      `INSERT INTO afterlife.recoveries (application_name, executor_id, reason, detected_by, recovered_by, lock_mode, outcome, reenqueued, batches)
       VALUES ($1, $2, 'manual', $3, 'test', 'degraded', 'completed', 0, 0)`,
      [app, EVIL, `spoof\nfake line`],
    );
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  it('afterlife-plane status prints no control character but newlines between its own lines, and no line a forged ID made', async () => {
    const run = await runCli(['status'], env);
    expect(run.code, run.stderr).toBe(0);

    expect(run.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    const lines = run.stdout.split('\n');
    expect(lines.some((l) => l.startsWith('{'))).toBe(false);
    expect(lines.some((l) => l.startsWith('fake line'))).toBe(false);
    // Escaped, still recognisable: the operator can see and copy what is there.
    expect(run.stdout).toContain('exec-evil\\n{"level"');
    expect(run.stdout).toContain('\\x1b[31mRED');
  });

  it('--json keeps the exact ID (JSON escapes it)', async () => {
    const run = await runCli(['status', '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    const s = JSON.parse(run.stdout) as { executors: Array<{ executorId: string | null }> };
    expect(s.executors.map((e) => e.executorId)).toContain(EVIL);
  });

  it('an error naming bad input is escaped on stderr', async () => {
    const run = await runCli(['recover', `exec\u001b[31m\nx`], env);

    expect(run.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
  });
});
