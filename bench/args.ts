import { loadavg } from 'node:os';
import type { z } from 'zod';

/**
 * The flags of the benches that take `--name value` pairs and a bare `--json` (bench/fleet, bench/chaos, bench/livenessCost, bench/pythonIdle),
 * checked by the bench's own schema: one parser, so every bench refuses a mistyped flag the same way.
 */
export function parseFlags<S extends z.ZodType>(bench: string, schema: S, argv: string[]): z.infer<S> {
  const raw: Record<string, unknown> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const key = a.slice(2);
    if (key === 'json') raw.json = true;
    else raw[key] = argv[++i];
  }
  const r = schema.safeParse(raw);
  if (!r.success) throw new Error(`${bench}: ${r.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

/** The load average, as the benches print it beside their figures. */
export function loadLine(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
}
