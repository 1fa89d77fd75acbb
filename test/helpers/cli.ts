import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { z } from 'zod';

/** Runs the built CLI (dist/cli/index.js) as an operator would, with an explicit environment. */
export const CLI = fileURLToPath(new URL('../../dist/cli/index.js', import.meta.url));

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], env: Record<string, string | undefined>, timeoutMs = 30_000): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { PATH: process.env.PATH, METADATA_SERVER_DETECTION: 'none', ...env }, timeout: timeoutMs },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Parses the one JSON document a `--json` run prints and validates it against the command's schema. */
export function parseJson<T>(run: CliRun, schema: z.ZodType<T>): T {
  const lines = run.stdout.trim().split('\n');
  if (lines.length !== 1) throw new Error(`expected one JSON line on stdout, got ${lines.length}:\n${run.stdout}\nstderr:\n${run.stderr}`);
  return schema.parse(JSON.parse(lines[0] ?? ''));
}
