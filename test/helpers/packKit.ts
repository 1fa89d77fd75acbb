import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, rmdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const KIT_DIR = join(ROOT, 'packages/executor');
/** A pack (tshy's build included) takes well under this; a lock older than it was left by a killed run. */
const STALE_MS = 300_000;

/**
 * `npm pack` of the kit into `dest`, one at a time per checkout: its prepack rebuilds packages/executor/dist
 * in place, and two test files packing at once (vitest runs two files in parallel) would build over each
 * other. The lock is a directory (mkdir is atomic) in the system's temp dir, named after the checkout.
 */
export async function packKit(dest: string): Promise<{ filename: string; files: { path: string }[] }> {
  const lock = join(tmpdir(), `afterlife-pack-${createHash('sha256').update(ROOT).digest('hex').slice(0, 12)}.lock`);
  const deadline = Date.now() + 2 * STALE_MS;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      const age = (() => {
        try {
          return Date.now() - statSync(lock).mtimeMs;
        } catch {
          return 0;
        }
      })();
      if (age > STALE_MS) rmdirSync(lock);
      if (Date.now() > deadline) throw new Error(`packKit: ${lock} held for too long`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  try {
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(
        'npm',
        ['pack', '--json', '--pack-destination', dest, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
        { cwd: KIT_DIR, timeout: 300_000, maxBuffer: 16 << 20 },
        (err, out, errOut) => (err ? reject(new Error(`npm pack failed: ${err.message}\n${out}\n${errOut}`)) : resolve(out)),
      ),
    );
    const info = (JSON.parse(stdout) as { filename: string; files: { path: string }[] }[])[0];
    if (!info) throw new Error('npm pack printed nothing');
    return info;
  } finally {
    rmdirSync(lock);
  }
}
