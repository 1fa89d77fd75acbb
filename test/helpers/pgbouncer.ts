import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN_DATABASE_URL, freePort } from './services.js';

export const PGBOUNCER_BIN = process.env.PGBOUNCER_BIN ?? '/usr/sbin/pgbouncer';

/**
 * True (and said loudly) when no PgBouncer binary is here, so `what` must skip: a real pooler is the point
 * of those tests, never a stand-in. `.ci/run` installs Debian's package when it can.
 */
export function pgbouncerMissing(what: string): boolean {
  if (existsSync(PGBOUNCER_BIN)) return false;
  console.warn(`!!! SKIPPED: ${what} (no PgBouncer at ${PGBOUNCER_BIN}: apt-get install pgbouncer, or set PGBOUNCER_BIN)`);
  return true;
}

/**
 * A private PgBouncer (the Debian package) in front of the test Postgres, on a free port, from a generated
 * ini: `trust` auth for the listed users, the given pool mode and pool size. PgBouncer refuses to run as
 * root, so under root it drops to the `postgres` user (-u), and its directory is made writable for it.
 */
export interface PrivatePgBouncer {
  port: number;
  /** `url` of the test Postgres with host and port replaced by the pooler's. */
  via(url: string): string;
  stop(): Promise<void>;
}

export async function startPgBouncer(o: {
  poolMode: 'session' | 'transaction' | 'statement';
  poolSize: number;
  users?: string[];
}): Promise<PrivatePgBouncer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'afterlife-pgbouncer-'));
  chmodSync(dir, 0o777);
  const upstream = new URL(ADMIN_DATABASE_URL);
  const users = o.users ?? [decodeURIComponent(upstream.username) || 'postgres'];
  writeFileSync(join(dir, 'users.txt'), users.map((u) => `"${u}" ""`).join('\n') + '\n');
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${upstream.hostname} port=${upstream.port || '5432'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      `pool_mode = ${o.poolMode}`,
      `default_pool_size = ${o.poolSize}`,
      'unix_socket_dir =',
      'ignore_startup_parameters = extra_float_digits,options',
    ].join('\n') + '\n',
  );
  const asRoot = process.getuid?.() === 0;
  const proc: ChildProcess = spawn(PGBOUNCER_BIN, [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')], { stdio: 'ignore' });
  const deadline = Date.now() + 10_000;
  while (!(await listening(port))) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`pgbouncer did not start on ${port} (exit ${String(proc.exitCode)})`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    via: (url) => {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
