import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';

/**
 * Child processes of the local stack. Each runs in its own process group (detached), so stopping it
 * reaches everything it started (functions-framework → node, the emulator's shell → java) and Ctrl-C on
 * the stack never leaves a stray JVM or server behind.
 */
export interface Managed {
  name: string;
  child: ChildProcess;
  /** The last lines it printed, for error messages. */
  tail(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves when a printed line matches; rejects when the process exits first or the bound passes. */
  waitForLine(pattern: RegExp, timeoutMs: number): Promise<void>;
  stop(graceMs?: number): Promise<void>;
}

export function spawnManaged(
  name: string,
  command: string,
  args: string[],
  opts: {
    env?: NodeJS.ProcessEnv;
    onLine?: (line: string) => void;
    cwd?: string;
    /** Run as this OS user and group (embedded Postgres as root runs as `postgres`). */
    uid?: number;
    gid?: number;
    /** What stop() sends first: SIGTERM unless the program means something else by it (Postgres: SIGINT, fast shutdown). */
    stopSignal?: NodeJS.Signals;
  } = {},
): Managed {
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    env: opts.env ?? process.env,
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
    ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
    ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
  });
  const lines: string[] = [];
  const watchers = new Set<(line: string) => void>();
  const onData = (b: Buffer) => {
    for (const line of b.toString().split('\n')) {
      if (!line.trim()) continue;
      lines.push(line);
      if (lines.length > 50) lines.shift();
      opts.onLine?.(line);
      for (const w of watchers) w(line);
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    // A command that cannot be spawned at all never exits; report it as an exit.
    child.once('error', () => resolve({ code: 127, signal: null }));
  });
  const running = () => child.exitCode === null && child.signalCode === null;
  const tail = () => lines.join('\n');
  return {
    name,
    child,
    tail,
    exited,
    waitForLine: (pattern, timeoutMs) =>
      new Promise<void>((resolve, reject) => {
        const done = (err?: Error) => {
          clearTimeout(timer);
          watchers.delete(watch);
          if (err) reject(err);
          else resolve();
        };
        const watch = (line: string) => {
          if (pattern.test(line)) done();
        };
        const timer = setTimeout(() => done(new Error(`${name} not ready in ${timeoutMs} ms:\n${tail()}`)), timeoutMs);
        watchers.add(watch);
        if (lines.some((l) => pattern.test(l))) done();
        void exited.then(({ code, signal }) => done(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${tail()}`)));
      }),
    stop: async (graceMs = 5_000) => {
      if (!running() || child.pid === undefined) return;
      signalGroup(child.pid, opts.stopSignal ?? 'SIGTERM');
      const timer = setTimeout(() => signalGroup(child.pid ?? 0, 'SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
      // The leader is gone; anything it left in its group goes too.
      signalGroup(child.pid, 'SIGKILL');
    },
  };
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(-pid, signal);
  } catch {
    /* the group is already gone */
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no free port'))));
    });
  });
}

/**
 * `p`, or a rejection with the signal's reason as soon as it aborts: a readiness wait raced with Ctrl-C, so
 * stopping the stack never waits out a 30 s start-up bound. The listener goes when either settles.
 */
export async function raceAbort<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  signal.throwIfAborted();
  let onAbort = () => {};
  const abort = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([p, abort]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Waits for a just-spawned process to be ready. If it never gets there (it exits, the bound passes, the
 * signal aborts) it is stopped here: the caller has not registered it yet, so nobody else would.
 */
export async function readyOrStop(
  proc: Managed,
  ready: Promise<unknown>,
  signal: AbortSignal | undefined,
  graceMs?: number,
): Promise<void> {
  try {
    await raceAbort(ready, signal);
  } catch (err) {
    await proc.stop(graceMs);
    throw err;
  }
}

/** Polls until `probe` is truthy; the bound is the failure. */
export async function until(
  what: string,
  probe: () => Promise<boolean>,
  timeoutMs: number,
  intervalMs = 100,
  signal?: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    signal?.throwIfAborted();
    try {
      if (await probe()) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? ` (${String(last)})` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
