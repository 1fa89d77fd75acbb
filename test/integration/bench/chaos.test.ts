import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { embeddedPostgresBlocked } from '../../helpers/postgresServer.js';

const CHAOS = fileURLToPath(new URL('../../../dist/bench/chaos.js', import.meta.url));

// The bench runs on a private embedded Postgres, which root runs as the `postgres` user.
const blocked = await embeddedPostgresBlocked('the chaos soak smoke');

/**
 * bench/chaos, short: one fault of each kind — the 13 s freeze first, so the others land inside it — on
 * five real executors with the kit and the plane as deployed, and the soak's verdicts from the database
 * hold at zero. It fails if a fenced process runs on beside its replacement (its fence exit disabled: an
 * unfenced freeze), if a short freeze is declared, or if a step runs again after its checkpoint.
 */
describe.skipIf(blocked)('bench:chaos smoke', () => {
  it('one fault of each kind: 0 re-run, 0 overlap, 0 false deaths, 0 lost, every freeze past the lease fenced', async () => {
    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const p = spawn(
        process.execPath,
        [
          CHAOS,
          ...['--minutes', '0.15', '--executors', '5', '--seed', '39', '--faults', 'longFreeze,kill,term,freeze,lostHost'],
          ...[
            '--fault-every-s',
            '0.5',
            '--every-ms',
            '250',
            '--long',
            '0',
            '--settle-s',
            '0',
            '--drain-s',
            '60',
            '--pubsub',
            'bridge',
            '--json',
          ],
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
      p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      p.once('exit', (code) => resolve({ code, stdout, stderr }));
    });
    const lines = out.stdout.trim().split('\n');
    expect(lines, out.stderr).toHaveLength(1);
    const r = JSON.parse(lines[0] as string) as Record<string, unknown>;
    expect(
      { reRuns: r.reRuns, overlaps: r.overlaps, falseDeaths: r.falseDeaths, lost: r.lost, unfenced: r.unfenced },
      JSON.stringify(r),
    ).toEqual({ reRuns: 0, overlaps: 0, falseDeaths: 0, lost: 0, unfenced: 0 });
    expect(out.code, out.stderr).toBe(0);
    // Every kind happened, and work moved: the zeros above are about faults that took place.
    for (const k of ['kill', 'term', 'freeze', 'longFreeze', 'lostHost'])
      expect((r.faults as Record<string, number>)[k], k).toBeGreaterThanOrEqual(1);
    const w = r.workflows as { accepted: number; success: number };
    expect(w.accepted).toBeGreaterThan(10);
    expect(w.success).toBeGreaterThanOrEqual(w.accepted);
    expect((r.recoveryAll as { n: number }).n).toBeGreaterThan(0);
  }, 150_000);
});
