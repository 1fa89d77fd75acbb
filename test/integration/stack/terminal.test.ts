import { type ChildProcess, spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { embeddedPostgresBlocked } from '../../helpers/postgresServer.js';
import { START_SCRIPT } from '../../helpers/stack.js';

/**
 * Issue 20's acceptance for the terminal: `npm start` in a pseudo-terminal (util-linux `script`), idle for
 * a full minute after it is up, prints a bounded number of lines and each is one readable event line
 * (time, function, level, message), not JSON; with LOG_FORMAT=json every line it prints, from the first
 * progress line to the last, parses as JSON with `severity` and `event`. Stopped with a Ctrl-C typed
 * into the terminal, as a person would.
 */
const IDLE_MS = 60_000;
/**
 * Per idle minute: a `reaper_ticks` summary and a `reaper_summary` per invocation, and the standby
 * invocations the local scheduler starts every 10 s giving up (`reaper_skipped`). docs/logging.md.
 */
const IDLE_TERMINAL_LINES = 15;
const ANSI = /\u001b\[[0-9;]*m/g;
const READABLE = /^\d\d:\d\d:\d\d\.\d{3} \S.{0,12} (DEBUG|INFO |NOTE |WARN |ERROR|CRIT ) \S/;

interface Pty {
  child: ChildProcess;
  text(): string;
  exited: Promise<unknown>;
  stop(): Promise<void>;
}

function inPty(env: NodeJS.ProcessEnv): Pty {
  // `exec`: without SHELL (as under CI) script runs dash, which would stay between the pty and npm start.
  const child = spawn('script', ['-qfec', `exec ${process.execPath} ${START_SCRIPT}`, '/dev/null'], {
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    child,
    text: () => out,
    exited,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.stdin?.write('\u0003'); // Ctrl-C on the terminal: SIGINT to npm start's foreground group
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function until(what: string, probe: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The terminal's lines; `^C` is the terminal echoing the Ctrl-C the test typed, not npm start's output. */
const lines = (s: string) =>
  s
    .replace(ANSI, '')
    .split(/\r?\n/)
    .map((l) => l.replace(/\r/g, '').replace(/^\^C/, ''))
    .filter((l) => l.trim() !== '');

// npm start without DATABASE_URL runs embedded Postgres, which root runs as the `postgres` user.
const blocked = await embeddedPostgresBlocked('npm start in a terminal');

describe.skipIf(blocked)('npm start in a terminal', () => {
  // A person's terminal: Node's colour detection (tty hasColors) answers "no colour" when CI is set, as it is in CI.
  const env = {
    ...process.env,
    LOCAL_PUBSUB: 'bridge',
    TERM: 'xterm-256color',
    NO_COLOR: undefined,
    FORCE_COLOR: undefined,
    LOG_FORMAT: undefined,
    CI: undefined,
  };

  it(`idle for a minute: at most ${IDLE_TERMINAL_LINES} lines, each one readable event line`, { timeout: 150_000 }, async () => {
    const pty = inPty(env);
    try {
      await until('the stack is up', () => pty.text().includes('Ctrl-C stops everything this started.'), 60_000);
      const upAt = pty.text().length;
      await new Promise((r) => setTimeout(r, IDLE_MS));
      const idle = pty.text().slice(upAt);
      const shown = lines(idle);
      console.log(`[issue 20] npm start, idle ${IDLE_MS / 1000} s on a terminal: ${shown.length} lines\n${shown.join('\n')}`);
      expect(shown.length).toBeLessThanOrEqual(IDLE_TERMINAL_LINES);
      for (const l of shown) {
        expect(l).toMatch(READABLE);
        expect(l.trim().startsWith('{')).toBe(false);
      }
      // Colour on a terminal that has it.
      expect(pty.text()).toMatch(ANSI);
    } finally {
      await pty.stop();
    }
  });

  it('Ctrl-C stops the functions before Postgres: no WARN or ERROR on the way down', { timeout: 120_000 }, async () => {
    const pty = inPty(env);
    let downFrom = 0;
    let stopMs = 0;
    try {
      await until('the stack is up', () => pty.text().includes('Ctrl-C stops everything this started.'), 60_000);
      // Past the reaper's first invocation and into the next: one is in flight (connected) when Ctrl-C comes.
      await until('the reaper ticking', () => /reaper\s.*(INFO|NOTE)/.test(pty.text()), 30_000);
      await new Promise((r) => setTimeout(r, 11_000));
      downFrom = pty.text().length;
      const at = Date.now();
      await pty.stop();
      stopMs = Date.now() - at;
    } finally {
      await pty.stop();
    }
    const down = lines(pty.text().slice(downFrom));
    console.log(`[Ctrl-C] stopped in ${stopMs} ms, ${down.length} lines on the way down\n${down.join('\n')}`);
    expect(down.at(-1)).toBe('local stack stopped');
    // Postgres stopped first (in the terminal's process group, the Ctrl-C reached it at once): every
    // function then logged its lost connections, and the reaper its failed tick and lease renewal.
    expect(down.filter((l) => /\b(WARN|ERROR|CRIT) /.test(l))).toEqual([]);
  });

  it('with LOG_FORMAT=json every line is JSON with severity and event', { timeout: 120_000 }, async () => {
    const pty = inPty({ ...env, LOG_FORMAT: 'json' });
    try {
      await until('the stack is up', () => pty.text().includes('"event":"stack_ready"'), 60_000);
      // A few reaper invocations' worth.
      await new Promise((r) => setTimeout(r, 15_000));
    } finally {
      await pty.stop();
    }
    const all = lines(pty.text());
    expect(all.length).toBeGreaterThan(10);
    for (const l of all) {
      let parsed: { severity?: unknown; event?: unknown };
      try {
        parsed = JSON.parse(l) as typeof parsed;
      } catch {
        throw new Error(`not JSON: ${l}`);
      }
      expect(typeof parsed.severity, l).toBe('string');
      expect(typeof parsed.event, l).toBe('string');
    }
    expect(all.some((l) => l.includes('"event":"stack_stopped"'))).toBe(true);
  });
});
