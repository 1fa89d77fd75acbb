import { realpathSync } from 'node:fs';
import { join as joinPath } from 'node:path';
import { inline, shellQuote } from '../../cli/format.js';
import { maskSecrets } from '../../packages/executor/src/log.js';
import { ROOT } from './functions.js';
import { dbosSystemUrl } from './dbosUrl.js';
import type { GuardedApplication } from './guardAll.js';
import { guardBounds, type Stack } from './index.js';

/** What `npm start` prints: the summary, and the URLs in it and in its `--json` line. */
/**
 * A URL the user brought (DATABASE_URL, REDIS_URL) is shown with its password masked: terminals are
 * recorded and pasted into tickets. The stack's own embedded Postgres and local Redis carry no secret,
 * so their URLs stay whole and the printed `export` line works as is.
 */
export function shownPostgres(st: Stack): string {
  return st.postgres.kind === 'embedded' ? st.postgres.url : maskSecrets(st.postgres.url);
}
export function shownRedis(url: string, kind: Stack['redis']['kind']): string {
  return kind === 'local' ? url : maskSecrets(url);
}

/** `ms`: the time to ready; `sinceNpmStart`: counted from when `npm start` began (scripts/launch.mjs), build included. */
export function summary(st: Stack, ms: number, sinceNpmStart = false): string {
  const rows: Array<[string, string]> = [
    [
      'applications',
      `${st.applicationName}${st.applicationNameDefaulted ? ' (the local default)' : ''}, and each application whose kits register in this database, as each appears (printed: "guarding application …"; up to ${guardBounds(process.env).maxApplications} at once, LOCAL_MAX_APPLICATIONS)`,
    ],
    [
      'postgres',
      `${shownPostgres(st)}   (${st.postgres.kind === 'embedded' ? `embedded PostgreSQL, data in ${st.postgres.dataDir}, removed on exit` : 'DATABASE_URL'})`,
    ],
    [
      'redis',
      st.redis.url
        ? `${shownRedis(st.redis.url, st.redis.kind)}   (${st.redis.kind === 'local' ? 'local redis-server' : 'REDIS_URL'})`
        : `none — DEGRADED: ${st.redis.kind === 'none' ? st.redis.reason : ''}`,
    ],
    [
      'pub/sub',
      st.pubsub.kind === 'emulator'
        ? `emulator at ${st.pubsub.host}, project ${st.project}`
        : `in-process bridge at ${st.pubsub.url} (${st.pubsub.reason})`,
    ],
    [
      'death notices',
      `topic ${st.deathTopic} → subscription executor-death-local → executorDeath (ack on 2xx, nack otherwise; dead letters to ${st.deadLetterTopic} after 5)`,
    ],
    ...st.functions.map((f): [string, string] => [`function ${f.target}`, f.url]),
    [
      'scheduler',
      st.scheduler
        ? `POST reaper every ${Number(process.env.LOCAL_SCHEDULE_MS || 10_000) / 1000} s`
        : 'off (this build registers no reaper target)',
    ],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return [
    '',
    `afterlife local stack is up (${(ms / 1000).toFixed(1)} s${sinceNpmStart ? ' since npm start began, build included' : ''})`,
    ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`),
    '',
    "Your DBOS app, each process with its own executor ID (no application name to set: DBOS's own is guarded):",
    `  ${exportLine(appEnv(st))}`,
    '  DBOS__VMID=worker-1 <start your app>    # a second process: DBOS__VMID=worker-2',
    '',
    `The CLI, from any directory (it reads application ${inline(st.applicationName)}${st.applicationNameDefaulted ? ', the stack’s default, which has no executors unless your app is named so' : ''}; your app's is printed as "its status:" once it is guarded):`,
    `  ${exportLine(cliEnv(st))}`,
    `  ${cliCommand()} status            # another application: ${cliCommand()} status --app '<its DBOS name>'`,
    '',
    'Ctrl-C stops everything this started.',
    '',
  ].join('\n');
}

/**
 * What `npm start` prints when it starts guarding another application. The name and the kits' IDs come from
 * registry rows (anyone with the kit's grants writes them): escaped for the terminal, and the command quoted
 * for the shell it will be pasted into.
 */
export function guardingText(g: GuardedApplication): string {
  const urls = g.functions.map((f) => `${f.target} ${f.url}`).join(', ');
  return (
    `guarding application ${inline(g.applicationName)} (its kits: ${g.executorIds.map(inline).join(', ')}), ready in ${(g.startedInMs / 1000).toFixed(1)} s: ${urls}\n` +
    `  its status: ${cliCommand()} status --app ${inline(shellQuote(g.applicationName))}`
  );
}

/**
 * The operator CLI as a command that works from any directory: `afterlife-plane` once the checkout is linked
 * (`npm link` puts that bin on PATH; the name answers to no other registry package), else this checkout's
 * own entry point by its absolute path.
 */
export function cliCommand(): string {
  const linked = (process.env.PATH ?? '').split(':').some((dir) => dir !== '' && existsLink(joinPath(dir, 'afterlife-plane')));
  return linked ? 'afterlife-plane' : `node ${shellQuote(joinPath(ROOT, 'dist/cli/index.js'))}`;
}

function existsLink(path: string): boolean {
  try {
    return realpathSync(path) === realpathSync(joinPath(ROOT, 'dist/cli/index.js'));
  } catch {
    return false;
  }
}

/**
 * The variables an app's process needs to join the stack, with no application name: the app's DBOS reads
 * its system database from DBOS_SYSTEM_DATABASE_URL (as DBOS's templates do; the kit takes it from DBOS),
 * the kit its Redis, Pub/Sub and project from the rest, and both must agree with the functions on a
 * non-default key prefix, schema or topic. The stack guards whatever DBOS calls the app.
 */
export function appEnv(st: Stack): Record<string, string> {
  const env = st.env ?? {};
  return defined({
    DBOS_SYSTEM_DATABASE_URL: dbosSystemUrl(shownPostgres(st)),
    REDIS_URL: st.redis.url ? shownRedis(st.redis.url, st.redis.kind) : undefined,
    REDIS_KEY_PREFIX: st.redis.url ? env.REDIS_KEY_PREFIX : undefined,
    DBOS_SYSTEM_SCHEMA: env.DBOS_SYSTEM_SCHEMA && env.DBOS_SYSTEM_SCHEMA !== 'dbos' ? env.DBOS_SYSTEM_SCHEMA : undefined,
    AFTERLIFE_SCHEMA: env.AFTERLIFE_SCHEMA && env.AFTERLIFE_SCHEMA !== 'afterlife' ? env.AFTERLIFE_SCHEMA : undefined,
    ...(st.pubsub.kind === 'emulator' ? { PUBSUB_EMULATOR_HOST: st.pubsub.host } : { PUBSUB_BRIDGE_URL: st.pubsub.url }),
    GOOGLE_CLOUD_PROJECT: st.project,
    EXECUTOR_DEATH_TOPIC: st.deathTopic !== 'executor-deaths' ? st.deathTopic : undefined,
  });
}

/** The CLI's: the database and the first application (`--app` picks another), Redis for the heartbeats. */
export function cliEnv(st: Stack): Record<string, string> {
  const env = st.env ?? {};
  return defined({
    DATABASE_URL: shownPostgres(st),
    DBOS_APPLICATION_NAME: st.applicationName,
    REDIS_URL: st.redis.url ? shownRedis(st.redis.url, st.redis.kind) : undefined,
    REDIS_KEY_PREFIX: st.redis.url ? env.REDIS_KEY_PREFIX : undefined,
    DBOS_SYSTEM_SCHEMA: env.DBOS_SYSTEM_SCHEMA && env.DBOS_SYSTEM_SCHEMA !== 'dbos' ? env.DBOS_SYSTEM_SCHEMA : undefined,
    AFTERLIFE_SCHEMA: env.AFTERLIFE_SCHEMA && env.AFTERLIFE_SCHEMA !== 'afterlife' ? env.AFTERLIFE_SCHEMA : undefined,
  });
}

/** `export K='v' …` for a POSIX shell. */
export function exportLine(vars: Record<string, string>): string {
  return `export ${Object.entries(vars)
    .map(([k, v]) => `${k}=${shellQuote(v)}`)
    .join(' ')}`;
}

function defined(vars: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(vars).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''));
}
