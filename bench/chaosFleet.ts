import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentSpec } from '../examples/agent-app/workflows.js';
import { FENCED_EXIT_CODE } from '../packages/executor/src/runtime/fence.js';
import { type AgentExecutor, startAgentExecutor } from '../scripts/stack/executor.js';
import { type Forwarder, startForwarder } from '../test/helpers/forwarder.js';

/**
 * bench/chaos's fleet: N real DBOS executors with the kit (the example agent app), each with every Postgres
 * connection it has through a forwarder of its own (test/helpers/forwarder.ts, Cloud SQL's proxy), so any of
 * them can lose its host. Faults are real signals; every executor that exits is replaced by a fresh one under
 * a new ID, as Cloud Run replaces an instance. What the fleet records is what the bench did (which fault,
 * when, how the process ended), never what the executors say about themselves.
 */
export const FAULT_KINDS = ['kill', 'term', 'freeze', 'longFreeze', 'lostHost'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Cloud Run's SIGTERM → SIGKILL grace. */
const TERM_GRACE_MS = 10_000;
/** After SIGCONT, how long a fenced process may take to exit before it counts as not fenced. */
const FENCE_EXIT_BOUND_MS = 15_000;
/** A lost host's Postgres legs stay open this long, then go (as the server's TCP keepalive would end them). */
const LOST_LEGS_MS = 30_000;

export interface Fault {
  kind: FaultKind;
  executorId: string;
  /** Epoch ms (this host's clock, the database's too: one machine). */
  at: number;
  /** SIGSTOP's length, for the freezes. */
  frozenMs?: number;
  /** How the process ended, when the fault ended it: exit code or signal, and when. */
  exit?: { code: number | null; signal: string | null; at: number };
  /** A long freeze whose process did not exit FENCED_EXIT_CODE on SIGCONT (killed after the bound instead). */
  unfenced?: boolean;
}

interface Member {
  id: string;
  exec: AgentExecutor;
  fwd: Forwarder;
  /** `up`: takes work and may be faulted; `faulted`: a fault is under way; `gone`: exited. */
  state: 'up' | 'faulted' | 'gone';
}

export interface ChaosFleetOptions {
  url: string;
  app: string;
  env: Record<string, string>;
  size: number;
  rand: () => number;
  say: (line: string) => void;
  /** Where each executor's output is written when it exits. */
  logDir: string;
}

export interface ChaosFleet {
  /** Starts `size` executors; resolves when they are ready. */
  start(): Promise<void>;
  /** Sends one workflow to a random executor that is up; resolves whether it was accepted. */
  send(workflowId: string, spec: AgentSpec): Promise<boolean>;
  /** Faults a random up executor with `kind`, if at least two are up (one always takes the work). */
  fault(kind: FaultKind): Fault | undefined;
  readonly faults: Fault[];
  /** Executors started so far, by ID. */
  readonly started: string[];
  /** Replacement starts that failed (not ready in time): the fleet ran smaller meanwhile. */
  readonly failedStarts: string[];
  /** Executors that exited with no fault of the bench's (a fence or a crash of their own), with how. */
  readonly unexpectedExits: string[];
  /** Waits for every fault under way to end (a freeze's SIGCONT, a fenced exit, a drain). */
  settle(timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

export function chaosFleet(o: ChaosFleetOptions): ChaosFleet {
  const members: Member[] = [];
  const faults: Fault[] = [];
  const started: string[] = [];
  const failedStarts: string[] = [];
  const unexpectedExits: string[] = [];
  const spawning = new Set<Promise<void>>();
  const timers = new Set<NodeJS.Timeout>();
  let stopping = false;
  let n = 0;
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };

  // A start under way when the run stops is waited for and stopped, never left running.
  const spawn = (): Promise<void> => {
    const p = spawnOne().finally(() => spawning.delete(p));
    spawning.add(p);
    return p;
  };
  const spawnOne = async (): Promise<void> => {
    if (stopping) return;
    const id = `chaos-${++n}`;
    const target = new URL(o.url);
    const fwd = await startForwarder({ host: target.hostname, port: Number(target.port) });
    started.push(id);
    let exec: AgentExecutor;
    try {
      exec = await startAgentExecutor({
        databaseUrl: fwd.via(o.url),
        applicationName: o.app,
        applicationVersion: 'v1',
        executorId: id,
        env: o.env,
        readyTimeoutMs: 120_000,
      });
    } catch (err) {
      if (!stopping) failedStarts.push(`${id}: ${String(err).split('\n')[0]}`);
      await fwd.close();
      if (!stopping) void spawn();
      return;
    }
    if (stopping) {
      await exec.stop();
      await fwd.close();
      return;
    }
    const m: Member = { id, exec, fwd, state: 'up' };
    members.push(m);
    void exec.exited.then((x) => {
      m.state = 'gone';
      // Its whole output, for the report to point at (the executors log WARNING and above, the kit's fence included).
      writeFileSync(join(o.logDir, `${id}.log`), `exit ${x.code ?? x.signal} at ${new Date().toISOString()}\n${exec.output.join('')}`);
      const f = faults.find((f) => f.executorId === id && f.kind !== 'freeze');
      if (f && !f.exit) f.exit = { code: x.code, signal: x.signal, at: Date.now() };
      if (!f && !stopping) {
        unexpectedExits.push(`${id} (${x.code ?? x.signal})`);
        o.say(`chaos: ${id} exited (${x.code ?? x.signal}) with no fault: ${exec.output.slice(-3).join('').slice(-400)}`);
      }
      // A lost host's legs are let go later (see LOST_LEGS_MS); any other forwarder is done with.
      if (f?.kind !== 'lostHost') void fwd.close();
      if (!stopping) void spawn();
    });
  };

  const pick = (): Member | undefined => {
    const up = members.filter((m) => m.state === 'up');
    return up[Math.floor(o.rand() * up.length)];
  };

  const fault = (kind: FaultKind): Fault | undefined => {
    if (members.filter((m) => m.state === 'up').length < 2) return undefined;
    const m = pick() as Member;
    m.state = 'faulted';
    const f: Fault = { kind, executorId: m.id, at: Date.now() };
    faults.push(f);
    if (kind === 'kill') m.exec.kill('SIGKILL');
    else if (kind === 'term') {
      m.exec.kill('SIGTERM');
      later(TERM_GRACE_MS, () => m.exec.kill('SIGKILL'));
    } else if (kind === 'lostHost') {
      // The host is gone: nothing it sent reaches Postgres again, and its Postgres sessions stay open.
      m.fwd.vanish();
      m.exec.kill('SIGKILL');
      later(LOST_LEGS_MS, () => void m.fwd.close());
    } else freeze(m, f, kind === 'freeze' ? 1_000 + Math.round(o.rand() * 4_000) : 13_000);
    return f;
  };

  const freeze = (m: Member, f: Fault, ms: number) => {
    f.frozenMs = ms;
    m.exec.kill('SIGSTOP');
    const thawed = new Promise<void>((resolve) =>
      later(ms, () => {
        m.exec.kill('SIGCONT');
        resolve();
      }),
    );
    if (f.kind === 'freeze') {
      void thawed.then(() => void (m.state === 'faulted' && (m.state = 'up')));
      return;
    }
    // Past the lease: the server ended its session, the plane declared it; on SIGCONT its fence must end it.
    void thawed.then(async () => {
      const exited = await Promise.race([m.exec.exited, new Promise<undefined>((r) => later(FENCE_EXIT_BOUND_MS, () => r(undefined)))]);
      if (exited?.code !== FENCED_EXIT_CODE) {
        f.unfenced = true;
        m.exec.kill('SIGKILL');
      }
    });
  };

  return {
    faults,
    started,
    failedStarts,
    unexpectedExits,
    start: async () => {
      await Promise.all(Array.from({ length: o.size }, () => spawn()));
    },
    send: async (workflowId, spec) => {
      const m = pick();
      if (!m) return false;
      // A start that never answers (its executor froze or died meanwhile) is not accepted; the end of the run
      // still checks it, if DBOS wrote it.
      return Promise.race([
        m.exec.start(workflowId, spec).then(() => true),
        new Promise<boolean>((r) => later(10_000, () => r(false))),
      ]).catch(() => false);
    },
    fault,
    settle: async (timeoutMs) => {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline && members.some((m) => m.state === 'faulted')) await new Promise((r) => setTimeout(r, 200));
    },
    stop: async () => {
      stopping = true;
      for (const t of timers) clearTimeout(t);
      await Promise.all([...spawning]);
      for (const m of members) if (m.state !== 'gone') m.exec.kill('SIGCONT');
      await Promise.all(members.map((m) => m.exec.stop()));
      await Promise.all(members.map((m) => m.fwd.close()));
    },
  };
}
