import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ROOT } from '../../scripts/stack/functions.js';

/**
 * A real DBOS for Python 2.30.0 app in a child process (test/fixtures/python/), with DBOS from
 * ../shared/python (see its README): killed with real signals. Where Python or DBOS is missing, tests skip
 * loudly on a developer's machine and fail in CI (CI=true), which must have them (.ci/run installs them).
 */
export const SHARED_PYTHON = resolve(ROOT, '../shared/python');
export const PYTHON = process.env.AFTERLIFE_PYTHON ?? '/usr/bin/python3';
const PYTHONPATH = join(SHARED_PYTHON, 'site');

let available: string | undefined | null = null;

/** Why DBOS for Python cannot run here, or undefined when it can. Throws in CI. */
export function pythonMissing(): string | undefined {
  if (available !== null) return available;
  const r = existsSync(PYTHON)
    ? spawnSync(PYTHON, ['-c', 'import dbos, psycopg, redis'], { env: pythonEnv(), encoding: 'utf8', timeout: 60_000 })
    : undefined;
  available =
    r?.status === 0
      ? undefined
      : `DBOS for Python is not importable with ${PYTHON} (${r?.stderr.trim().split('\n').at(-1) ?? 'no interpreter'}): run ../shared/python/setup.sh`;
  if (available !== undefined) {
    if (process.env.CI === 'true') throw new Error(available);
    console.warn(`\n!!! ${available}: the DBOS for Python suites are SKIPPED\n`);
  }
  return available;
}

function pythonEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    PYTHONPATH: [PYTHONPATH, process.env.PYTHONPATH].filter(Boolean).join(':'),
    PYTHONUNBUFFERED: '1',
    ...extra,
  };
}

export interface PythonApp {
  executorId: string;
  child: ChildProcess;
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal: NodeJS.Signals): void;
  stop(): Promise<void>;
}

export interface PythonAppOptions {
  databaseUrl: string;
  applicationName: string;
  executorId: string;
  applicationVersion?: string;
  /** The fixture script under test/fixtures/python/ (default agent_app.py). */
  script?: string;
  env?: Record<string, string>;
  readyTimeoutMs?: number;
}

/** Starts the app and resolves once DBOS has launched (its `{"ready": true}` line). */
export async function startPythonApp(o: PythonAppOptions): Promise<PythonApp> {
  const child = spawn(PYTHON, [join(ROOT, 'test/fixtures/python', o.script ?? 'agent_app.py')], {
    env: pythonEnv({
      DBOS_SYSTEM_DATABASE_URL: o.databaseUrl,
      APP_NAME: o.applicationName,
      DBOS__VMID: o.executorId,
      DBOS__APPVERSION: o.applicationVersion ?? 'v1',
      ...o.env,
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  const ready = new Promise<void>((resolveReady, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`python app ${o.executorId} not ready in time:\n${output.join('')}`)),
      o.readyTimeoutMs ?? 60_000,
    );
    const onData = (b: Buffer) => {
      output.push(b.toString());
      if (b.toString().includes('"ready": true')) {
        clearTimeout(timer);
        resolveReady();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (b: Buffer) => output.push(b.toString()));
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`python app ${o.executorId} exited (${code ?? signal}) before it was ready:\n${output.join('')}`));
    });
  });
  await ready;
  return {
    executorId: o.executorId,
    child,
    output,
    exited,
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
