import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Runs the built `npm start` script (dist/scripts/start.js) as a child process in its own process group,
 * the way a developer runs it, and reads the one JSON line it prints with `--json`.
 */
export const START_SCRIPT = fileURLToPath(new URL('../../dist/scripts/start.js', import.meta.url));

export interface StartedStack {
  info: {
    ready: true;
    applicationName: string;
    databaseUrl: string;
    postgres: 'embedded' | 'external';
    postgresDataDir: string | null;
    redisUrl: string | null;
    pubsub: { kind: 'emulator'; host: string } | { kind: 'bridge'; url: string };
    project: string;
    deathTopic: string;
    functions: Record<string, string>;
    /** What an app's process needs (no application name); each process adds its own DBOS__VMID. */
    appEnv: Record<string, string>;
    /** The CLI as a command that works from any directory. */
    cli: string;
    startedInMs: number;
  };
  child: ChildProcess;
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Ctrl-C's path (SIGTERM), then SIGKILL of the group if it is still up after 15 s (test cleanup). */
  kill(): Promise<void>;
}

export async function runStart(env: NodeJS.ProcessEnv, timeoutMs = 45_000): Promise<StartedStack> {
  const child = spawn(process.execPath, [START_SCRIPT, '--json'], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const output: string[] = [];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const info = await new Promise<StartedStack['info']>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start not ready in ${timeoutMs} ms:\n${output.join('')}`)), timeoutMs);
    let buffered = '';
    child.stdout?.on('data', (b: Buffer) => {
      output.push(b.toString());
      buffered += b.toString();
      const line = buffered.split('\n').find((l) => l.startsWith('{"ready":true'));
      if (line) {
        clearTimeout(timer);
        resolve(JSON.parse(line) as StartedStack['info']);
      }
    });
    child.stderr?.on('data', (b: Buffer) => output.push(b.toString()));
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`npm start exited (${code ?? signal}) before ready:\n${output.join('')}`));
    });
  });
  return {
    info,
    child,
    output,
    exited,
    kill: async () => {
      if (child.exitCode !== null || child.signalCode !== null || !child.pid) return;
      const pid = child.pid;
      child.kill('SIGTERM');
      const timer = setTimeout(() => {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }, 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
