import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './functions.js';

/**
 * A real DBOS Transact for Python 2.30.0 app (test/fixtures/python/kit_app.py) in a child process, with or
 * without the Python kit (packages/executor-python), killed with real signals and driven over stdin.
 *
 * The toolchain comes from `../shared/python/setup.sh --env` (Debian's python3 and DBOS 2.30.0 from source).
 * Where it is missing, `pythonToolchain()` says why (test/helpers/pythonExecutor.ts turns that into a loud
 * skip on a developer's machine and a failure in CI). Shared by the tests and bench/pythonKit.ts.
 */
export const KIT_APP = join(ROOT, 'test/fixtures/python/kit_app.py');
export const PYTHON_KIT_SRC = join(ROOT, 'packages/executor-python/src');
const SETUP = join(ROOT, '../shared/python/setup.sh');

export interface PythonToolchain {
  python: string;
  env: Record<string, string>;
}

let cached: PythonToolchain | string | undefined;

/** The toolchain, or why there is none (a sentence). */
export function pythonToolchain(): PythonToolchain | string {
  if (cached !== undefined) return cached;
  cached = find();
  return cached;
}

function find(): PythonToolchain | string {
  if (!existsSync(SETUP)) return `${SETUP} not found (the shared Python toolchain sits beside the repository)`;
  let out: string;
  try {
    out = execFileSync('bash', [SETUP, '--env'], { encoding: 'utf8', timeout: 30_000 });
  } catch (err) {
    return `${SETUP} --env failed: ${err instanceof Error ? err.message : String(err)}`;
  }
  const env: Record<string, string> = {};
  for (const m of out.matchAll(/^(?:export\s+)?([A-Z_][A-Z0-9_]*)=(?:"([^"]*)"|'([^']*)'|(\S*))\s*$/gm)) {
    env[m[1] as string] = m[2] ?? m[3] ?? m[4] ?? '';
  }
  const python = env.AFTERLIFE_PYTHON;
  if (!python) return `${SETUP} --env named no AFTERLIFE_PYTHON`;
  try {
    execFileSync(python, ['-c', 'import dbos, psycopg, redis'], {
      env: { ...process.env, ...env },
      stdio: 'pipe',
      timeout: 60_000,
    });
  } catch (err) {
    return `${python} cannot import dbos, psycopg and redis (run ${SETUP} as root once): ${err instanceof Error ? err.message : String(err)}`;
  }
  return { python, env };
}

export interface PythonExecutorOptions {
  databaseUrl: string;
  applicationName: string;
  executorId: string;
  applicationVersion?: string;
  /** Attach the kit (default true); false runs DBOS alone, as apps without the kit do. */
  kit?: boolean;
  env?: Record<string, string>;
}

export interface PythonExecutor {
  readonly executorId: string;
  readonly pid: number;
  readonly output: string[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Starts a workflow in this process (`start`) or on the app's queue (`enqueue`). */
  start(id: string, spec: { steps: number; stepMs: number }, how?: 'start' | 'enqueue'): Promise<void>;
  kill(signal: NodeJS.Signals): void;
  stop(): Promise<void>;
}

export async function startPythonExecutor(o: PythonExecutorOptions): Promise<PythonExecutor> {
  const t = pythonToolchain();
  if (typeof t === 'string') throw new Error(`no Python toolchain: ${t}`);
  const child: ChildProcess = spawn(t.python, ['-u', KIT_APP], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ...t.env,
      DATABASE_URL: o.databaseUrl,
      APP_NAME: o.applicationName,
      DBOS__VMID: o.executorId,
      DBOS__APPVERSION: o.applicationVersion ?? 'v1',
      AFTERLIFE_KIT: o.kit === false ? 'off' : 'on',
      AFTERLIFE_KIT_SRC: PYTHON_KIT_SRC,
      ...o.env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const waiters: Array<() => void> = [];
  const onData = (b: Buffer) => {
    output.push(b.toString());
    for (const w of waiters.splice(0)) w();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      resolve({ code, signal });
      for (const w of waiters.splice(0)) w();
    }),
  );
  child.stdin?.on('error', () => undefined);
  const until = async (re: RegExp, what: string, timeoutMs = 60_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!re.test(output.join(''))) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`${o.executorId} exited before ${what}:\n${output.join('').slice(-4_000)}`);
      if (Date.now() > deadline) throw new Error(`${o.executorId}: timed out waiting for ${what}:\n${output.join('').slice(-4_000)}`);
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 200);
      });
    }
  };
  try {
    await until(/"event": "ready"/, 'ready');
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    executorId: o.executorId,
    pid: child.pid ?? 0,
    output,
    exited,
    start: async (id, spec, how = 'start') => {
      child.stdin?.write(`${JSON.stringify({ [how]: id, ...spec })}\n`);
      await until(new RegExp(`"event": "started", "id": ${JSON.stringify(JSON.stringify(id)).slice(1, -1)}`), `workflow ${id} started`);
    },
    kill: (signal) => {
      child.kill(signal);
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
