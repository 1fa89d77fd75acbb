import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI } from '../../helpers/cli.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';

/** `afterlife-plane logs` follows one executor or workflow in a JSON log stream; `afterlife-plane status --watch` redraws in place. */
function run(args: string[], stdin: string, env: NodeJS.ProcessEnv = process.env): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.once('exit', (code) => resolve({ code, stdout }));
    child.stdin.end(stdin);
  });
}

const line = (o: Record<string, unknown>) => JSON.stringify({ severity: 'INFO', timestamp: { seconds: 1_796_000_000, nanos: 0 }, ...o });
const STREAM = [
  line({
    function: 'reaper',
    severity: 'NOTICE',
    message: 'executor declared dead: recovered inline',
    event: 'executor_dead',
    executorId: 'exec-A',
    reenqueued: 3,
  }),
  line({ function: 'reaper', message: 'reaper: 240 ticks', event: 'reaper_ticks', candidates: 2 }),
  line({ function: 'executorDeath', message: 'recovered', event: 'recovery', executorId: 'exec-B', workflowIds: ['wf-1', 'wf-2'] }),
  line({ function: 'reaper', severity: 'WARNING', message: 'stuck', event: 'stuck_workflow', workflowId: 'wf-9', executorId: 'exec-A' }),
  'Serving function...',
  '',
].join('\n');

describe('afterlife-plane logs', () => {
  it('--executor keeps only the lines about that executor, one readable line each', async () => {
    const r = await run(['logs', '--executor', 'exec-A'], STREAM, { ...process.env, NO_COLOR: '1' });
    expect(r.code).toBe(0);
    const out = r.stdout.trim().split('\n');
    expect(out).toHaveLength(2);
    expect(out[0]).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} reaper\s+NOTE {2}executor declared dead: recovered inline event=executor_dead executorId=exec-A reenqueued=3$/,
    );
    expect(out[1]).toMatch(/WARN .*event=stuck_workflow executorId=exec-A workflowId=wf-9/);
  });

  it('--workflow finds a workflow inside a list of IDs; --json keeps the lines JSON', async () => {
    const r = await run(['logs', '--workflow', 'wf-2', '--json'], STREAM);
    const out = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(out).toEqual([expect.objectContaining({ event: 'recovery', executorId: 'exec-B', severity: 'INFO' })]);
    const none = await run(['logs', '--workflow', 'wf-1x'], STREAM);
    expect(none.stdout).toBe('');
  });

  it('a bad LOG_FORMAT is a usage error', async () => {
    const r = await run(['logs'], STREAM, { ...process.env, LOG_FORMAT: 'yaml' });
    expect(r.code).toBe(2);
  });
});

describe('afterlife-plane status --watch', () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  it('redraws the table in place on a terminal until Ctrl-C', { timeout: 60_000 }, async () => {
    const env = { ...process.env, DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: uniqueName('watch') };
    // `exec`: without SHELL (as under CI) script runs dash, which stays as the parent and dies of the Ctrl-C itself (130).
    const child = spawn('script', ['-qfec', `exec ${process.execPath} ${CLI} status --watch --interval-s 1`, '/dev/null'], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const deadline = Date.now() + 30_000;
    while ((out.match(/\u001b\[H\u001b\[J/g) ?? []).length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    child.stdin.write('\u0003');
    const code = await exited;
    expect((out.match(/\u001b\[H\u001b\[J/g) ?? []).length).toBeGreaterThanOrEqual(3);
    expect(out).toContain('afterlife-plane status — application');
    expect(out).toContain('refreshing every 1 s');
    expect(code).toBe(0);
  });
});
