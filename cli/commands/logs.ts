import { createInterface } from 'node:readline';
import { type LogFilter, logFormat, render, wantsColour } from '../logLines.js';

/**
 * `afterlife-plane logs`: JSON log lines on stdin (`npm start -- --json | afterlife-plane logs --executor exec-A`, a
 * file saved from Logs Explorer as JSON lines) printed one readable line each, only those about the
 * executor and/or workflow asked for. Ends with its input.
 */
export async function followLogs(
  input: NodeJS.ReadableStream,
  output: NodeJS.WritableStream & { isTTY?: boolean; hasColors?: () => boolean },
  o: { json: boolean; env: Record<string, string | undefined>; filter: LogFilter },
): Promise<0> {
  const format = logFormat({ json: o.json, env: o.env, isTTY: true });
  const colour = format === 'pretty' && wantsColour(output, o.env);
  for await (const line of createInterface({ input, crlfDelay: Infinity })) {
    const out = render(line, '', { format, colour, filter: o.filter });
    if (out !== undefined) output.write(`${out}\n`);
  }
  return 0;
}
