import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { freePort, type Managed, readyOrStop, spawnManaged, until } from './proc.js';

/**
 * The function targets, each served by its own functions-framework process as on Cloud Run (one deploy per
 * target). Started as `node …/main.js` rather than through npx, so the PID we signal is the server itself.
 */
export const ROOT = projectRoot(dirname(fileURLToPath(import.meta.url)));
const FF_MAIN = join(ROOT, 'node_modules/@google-cloud/functions-framework/build/src/main.js');
const KNOWN_TARGETS = ['executorDeath', 'reaper', 'drain'] as const;
export type Target = (typeof KNOWN_TARGETS)[number];

/** The targets the built entry module registers (dist/functions/index.js imports one module per target). */
export function registeredTargets(entry = join(ROOT, 'dist/functions/index.js')): Target[] {
  const source = readFileSync(entry, 'utf8');
  return KNOWN_TARGETS.filter((t) => new RegExp(`['"]\\./${t}/index\\.js['"]`).test(source));
}

export interface ServedFunction {
  target: Target;
  url: string;
  proc: Managed;
}

export async function serveFunction(
  target: Target,
  env: NodeJS.ProcessEnv,
  onLine?: (line: string) => void,
  o: { signal?: AbortSignal; onSpawn?: (port: number) => void } = {},
): Promise<ServedFunction> {
  const port = await freePort();
  const proc = spawnManaged(`function ${target}`, process.execPath, [FF_MAIN, `--target=${target}`, `--port=${port}`], {
    env: { ...env, PORT: String(port), FUNCTION_TARGET: target, K_SERVICE: target },
    cwd: ROOT,
    ...(onLine ? { onLine } : {}),
  });
  o.onSpawn?.(port);
  const url = `http://127.0.0.1:${port}`;
  // functions-framework prints its banner before it listens; the port accepting a connection is the signal
  // (a TCP probe, because an empty HTTP request makes the CloudEvent middleware print a stack trace).
  const listening = Promise.race([
    until(`${target} listening on ${port}`, () => accepts(port), 20_000, 100, o.signal),
    proc.exited.then(({ code, signal }) => {
      throw new Error(`function ${target} exited (${code ?? signal}) before listening:\n${proc.tail()}`);
    }),
  ]);
  await readyOrStop(proc, listening, o.signal);
  return { target, url, proc };
}

/** The directory holding afterlife's package.json, from wherever this file runs (source or dist/). */
function projectRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'functions'))) return dir;
    if (dirname(dir) === dir) throw new Error(`afterlife's package root not found above ${from}`);
  }
}

/** Whether something listens on 127.0.0.1:`port` right now (also used by the stack's tests). */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
