import { execFile, type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './services.js';

const run = promisify(execFile);

/** A throwaway CA and a server certificate it signs for 127.0.0.1, made with openssl for one test file. */
export interface TestCa {
  dir: string;
  caPem: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
}

export async function makeTestCa(name = 'afterlife-test-ca'): Promise<TestCa> {
  const dir = await mkdtemp(join(tmpdir(), 'afterlife-ca-'));
  const p = (f: string) => join(dir, f);
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    p('ca.key'),
    '-out',
    p('ca.crt'),
  ]);
  await run('openssl', [
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=127.0.0.1',
    '-keyout',
    p('server.key'),
    '-out',
    p('server.csr'),
  ]);
  await writeFile(p('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    p('server.csr'),
    '-CA',
    p('ca.crt'),
    '-CAkey',
    p('ca.key'),
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    p('san.ext'),
    '-out',
    p('server.crt'),
  ]);
  return { dir, caPem: await readFile(p('ca.crt'), 'utf8'), caCert: p('ca.crt'), serverCert: p('server.crt'), serverKey: p('server.key') };
}

/** A private redis-server that speaks only TLS (`--port 0 --tls-port`), with a certificate of `ca`. */
export interface TlsRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
}

export async function startTlsRedis(ca: TestCa): Promise<TlsRedis> {
  const port = await freePort();
  const proc: ChildProcess = spawn(
    'redis-server',
    [
      '--port',
      '0',
      '--tls-port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--tls-cert-file',
      ca.serverCert,
      '--tls-key-file',
      ca.serverKey,
      '--tls-ca-cert-file',
      ca.caCert,
      '--tls-auth-clients',
      'no',
      '--save',
      '',
      '--appendonly',
      'no',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const output: string[] = [];
  proc.stdout?.on('data', (b: Buffer) => output.push(b.toString()));
  proc.stderr?.on('data', (b: Buffer) => output.push(b.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server (TLS) on ${port} did not start:\n${output.join('')}`)), 10_000);
    const check = () => {
      if (output.join('').includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout?.on('data', check);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server (TLS) exited with ${code}:\n${output.join('')}`));
    });
  });
  return {
    url: `rediss://127.0.0.1:${port}`,
    port,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

export async function removeTestCa(ca: TestCa | undefined): Promise<void> {
  if (ca) await rm(ca.dir, { recursive: true, force: true });
}
