import { printable } from '../format.js';
import type { CommandResult } from './types.js';
import { errorMessage } from '../../packages/executor/src/plane/index.js';

/**
 * `afterlife-plane status --watch`: the status again every interval until Ctrl-C. On a terminal the table is
 * redrawn in place (cursor home, clear below); elsewhere each refresh follows the last; with --json one
 * JSON document per line. A failed refresh is shown and the next one tried.
 */
const HOME_AND_CLEAR = '\u001b[H\u001b[J';

export async function watch(
  run: () => Promise<CommandResult<unknown>>,
  out: NodeJS.WritableStream & { isTTY?: boolean },
  o: { json: boolean; intervalMs: number; signal?: AbortSignal },
): Promise<0> {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  o.signal?.addEventListener('abort', onSignal, { once: true });
  try {
    while (!stop.signal.aborted) {
      let text: string;
      try {
        const r = await run();
        text = o.json ? `${JSON.stringify(r.json)}\n` : printable(r.text);
      } catch (err) {
        text = o.json
          ? `${JSON.stringify({ error: { code: 'refresh_failed', message: errorMessage(err) } })}\n`
          : `refresh failed: ${errorMessage(err)}\n`;
      }
      const tty = !o.json && out.isTTY === true;
      out.write(
        tty ? `${HOME_AND_CLEAR}${text}\n(refreshing every ${o.intervalMs / 1000} s — Ctrl-C to stop)\n` : o.json ? text : `${text}\n`,
      );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, o.intervalMs);
        stop.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  return 0;
}
