import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { embeddedPostgresBlocked } from '../../helpers/postgresServer.js';

const FLEET = fileURLToPath(new URL('../../../dist/bench/fleet.js', import.meta.url));

// The bench runs on a private embedded Postgres, which root runs as the `postgres` user.
const blocked = await embeddedPostgresBlocked('the fleet bench smoke');

/**
 * bench/fleet at a small N (issue 31): the whole path — private Postgres and Redis, simulated kits, a real
 * survivor and a SIGKILLed victim, the reaper as deployed — ends in one JSON line with the fields the
 * README's curve is made of, and nothing alive was declared dead. The figures themselves are the bench's
 * (measured on a quiet machine), not asserted here.
 */
describe.skipIf(blocked)('bench:fleet smoke', () => {
  it('prints one JSON line with the curve fields and no false death', async () => {
    const out = await new Promise<string>((resolve, reject) => {
      const p = spawn(
        process.execPath,
        [
          FLEET,
          '--executors',
          '20',
          '--kills',
          '1',
          '--minutes',
          '0.05',
          '--workflows',
          '2',
          '--settle-s',
          '0',
          '--start-window-s',
          '3',
          '--json',
        ],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
      p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      p.once('exit', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`bench:fleet exited ${code}:\n${stderr}\n${stdout}`))));
    });
    const lines = out.trim().split('\n');
    expect(lines).toHaveLength(1);
    const r = JSON.parse(lines[0] as string) as Record<string, unknown>;
    expect(r).toMatchObject({ executors: 20, falseDeaths: 0, kills: 1 });
    for (const k of ['tickP50Ms', 'tickP99Ms', 'detectionP95Ms', 'pgConnections', 'redisOpsPerSec']) {
      expect(typeof r[k], k).toBe('number');
      expect(r[k] as number, k).toBeGreaterThan(0);
    }
    // Every simulated kit attached, and the per-executor cost is reported.
    expect(r.slowAttaches).toBe(0);
    for (const k of ['attachMaxMs', 'pgCpuMsPerExecutorPerS', 'fleetStatementsPerExecutorPerS']) {
      expect(typeof r[k], k).toBe('number');
    }
    // The fleet's sessions are there: one liveness session per simulated executor at least.
    expect(r.pgConnections as number).toBeGreaterThanOrEqual(18);
  }, 120_000);
});
