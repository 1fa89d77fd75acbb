import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * The direct path's vanish (issue 19): every packet of one process's TCP connections dropped, in both
 * directions, by iptables rules that match exactly those connections' address and port pairs — so the
 * process's SIGKILL sends no FIN or RST that arrives, Postgres's later keepalive probes go unanswered, and
 * every other client on the machine is untouched (which `tc` on `lo` could not do). The rules carry a
 * comment naming this process, and `release()` removes exactly them; after that the peers' retransmissions
 * meet the dead process's closed sockets and are reset, so nothing is left behind.
 *
 * Needs root and iptables; `unavailable()` says why not, and callers skip loudly. Shared by bench/vanish.ts.
 */
export interface Dropper {
  /** Connections whose packets are dropped. */
  readonly connections: number;
  /** Removes this dropper's rules (all at once). Safe to call twice. */
  release(): Promise<void>;
}

export async function unavailable(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'it needs root';
  try {
    await run('iptables', ['-w', '-S', 'OUTPUT']);
    await run('ss', ['-V']);
    return undefined;
  } catch (err) {
    return `iptables or ss cannot run here (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`;
  }
}

interface Connection {
  local: string;
  localPort: string;
  peer: string;
  peerPort: string;
}

/** The established TCP connections a process holds (IPv4 loopback peers, as on this machine). */
async function connectionsOf(pid: number): Promise<Connection[]> {
  const { stdout } = await run('ss', ['-tnpH', 'state', 'established']);
  const out: Connection[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.includes(`pid=${pid},`)) continue;
    const [local, peer] = line.trim().split(/\s+/).slice(2, 4);
    const l = /^([\d.]+):(\d+)$/.exec(local ?? '');
    const p = /^([\d.]+):(\d+)$/.exec(peer ?? '');
    if (l && p) out.push({ local: l[1]!, localPort: l[2]!, peer: p[1]!, peerPort: p[2]! });
  }
  return out;
}

/** Drops every packet of `pid`'s established TCP connections, both ways, until `release()`. */
export async function dropConnectionsOf(pid: number): Promise<Dropper> {
  const tag = `afterlife-dropper-${process.pid}-${pid}`;
  const specs = (await connectionsOf(pid)).flatMap((c) => [
    ['-s', c.local, '-p', 'tcp', '--sport', c.localPort, '-d', c.peer, '--dport', c.peerPort],
    ['-s', c.peer, '-p', 'tcp', '--sport', c.peerPort, '-d', c.local, '--dport', c.localPort],
  ]);
  const rule = (spec: string[]) => ['OUTPUT', ...spec, '-m', 'comment', '--comment', tag, '-j', 'DROP'];
  // One iptables-restore: every rule lands at once, so no connection of the process is cut before another.
  await restore(`*filter\n${specs.map((spec) => `-I ${rule(spec).join(' ')}`).join('\n')}\nCOMMIT\n`);
  let added = specs;
  const release = async () => {
    if (added.length) await restore(`*filter\n${added.map((spec) => `-D ${rule(spec).join(' ')}`).join('\n')}\nCOMMIT\n`);
    added = [];
  };
  return { connections: specs.length / 2, release };
}

function restore(rules: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('iptables-restore', ['-w', '--noflush'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`iptables-restore exited ${code}: ${err.trim()}`))));
    child.stdin.end(rules);
  });
}
