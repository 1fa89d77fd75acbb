import { describe, expect, it } from 'vitest';
import { render } from '../../cli/logLines.js';

/**
 * A log line rendered for a terminal (`npm start`, `npm run demo`, `afterlife-plane logs`) carries names from
 * registry rows and notices: the reaper's unguarded_application WARNING quotes an application name anyone
 * with the kit's grants wrote. Nothing of it may act on the terminal; the JSON format keeps it as it is.
 */
const NAME = 'evil\u001b]0;owned\u0007\u001b[2K\nPASS  pooler\u009b\u2028\u202e';
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('log lines on a terminal', () => {
  it('the unguarded_application WARNING of a guarded reaper prints a hostile name escaped, on one line', () => {
    const line = JSON.stringify({
      severity: 'WARNING',
      event: 'unguarded_application',
      function: 'reaper',
      message: `1 live kit(s) registered under application "${NAME}", which no plane in this database guards (this one guards "demo"): their deaths are not recovered`,
      application: NAME,
      executorId: NAME,
      reason: ['a', NAME],
      err: { message: NAME },
    });
    for (const colour of [false, true]) {
      const shown = render(line, `reaper[${NAME}]`, { format: 'pretty', colour }) ?? '';
      // Colour codes are the renderer's own (ESC [ … m); nothing else of the line may be a control.
      expect(shown.replace(/\u001b\[[0-9;]*m/g, ''), shown).not.toMatch(CONTROLS);
      expect(shown).toContain('evil\\x1b]0;owned\\x07\\x1b[2K\\nPASS');
    }
    const json = render(line, 'reaper', { format: 'json', colour: false }) ?? '';
    expect((JSON.parse(json) as { application: string }).application).toBe(NAME);
  });

  it('a line that is not JSON (a banner, a stack trace) is escaped the same way', () => {
    const shown = render(`banner ${NAME}`, 'drain', { format: 'pretty', colour: false }) ?? '';
    expect(shown).not.toMatch(CONTROLS);
  });
});
