import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/db.js';
import { waitForLock } from '../../helpers/detection.js';
import { reaperFixture } from '../../helpers/reaper.js';

/**
 * A process restarted at once after a SIGKILL, with the same executor ID, before any plane declared the old
 * one: the registry still says alive, and the old liveness session is still being torn down when the new
 * one registers. Nothing of the old process is live, so the takeover is a NOTICE saying so — not the WARNING
 * about a second live process with this ID. Real DBOS executors with the kit; no reaper runs.
 */
interface Line {
  severity?: string;
  event?: string;
  message?: string;
}

describe('detection: a restart right after a SIGKILL', () => {
  const fx = reaperFixture('app-quick');
  const lines = (output: string[]): Line[] =>
    output
      .join('')
      .split('\n')
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as Line];
        } catch {
          return [];
        }
      });

  it('the takeover of the undeclared predecessor is a NOTICE that its session ended, not a WARNING that it was live', async () => {
    const first = await fx.executor('quick-1', { beat: true });
    await waitForLock(fx.tdb.sql, fx.app, 'quick-1');
    first.kill('SIGKILL');
    const second = await fx.executor('quick-1', { beat: true });
    await first.exited;
    const told = await waitFor(
      'the takeover reported',
      async () => lines(second.output).find((l) => l.event === 'executor_superseded_other'),
      { timeoutMs: 10_000 },
    );
    expect(told.severity, told.message).toBe('NOTICE');
    expect(told.message).toMatch(/liveness session ended \d+ ms after this one registered/);
    expect(lines(second.output).filter((l) => l.severity === 'WARNING' && /was live|still live/.test(l.message ?? ''))).toEqual([]);
    await waitForLock(fx.tdb.sql, fx.app, 'quick-1');
  }, 60_000);
});
