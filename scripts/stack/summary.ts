import { maskSecrets } from '../../packages/executor/src/log.js';
import { dbosSystemUrl } from './dbosUrl.js';
import type { Stack } from './index.js';

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

export function summary(st: Stack, ms: number): string {
  const rows: Array<[string, string]> = [
    [
      'application',
      `${st.applicationName}${st.applicationNameDefaulted ? '   (DBOS_APPLICATION_NAME unset: using the local default)' : ''}`,
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
  const join = exportLine(st);
  return [
    '',
    `afterlife local stack is up (${(ms / 1000).toFixed(1)} s)`,
    ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`),
    '',
    'To point the CLI or an executor at it:',
    `  ${join}`,
    '  npx afterlife status',
    '',
    'Ctrl-C stops everything this started.',
    '',
  ].join('\n');
}

/**
 * The variables an executor with the kit and the CLI need to join the stack: the kit reads the database
 * from DBOS_SYSTEM_DATABASE_URL (DBOS's own name; AFTERLIFE_DATABASE_URL overrides it), the CLI from
 * DATABASE_URL, and both must agree with the functions on a non-default key prefix, schema or topic.
 */
export function exportLine(st: Stack): string {
  const env = st.env ?? {};
  const vars: Array<[string, string | undefined]> = [
    ['DATABASE_URL', shownPostgres(st)],
    ['DBOS_SYSTEM_DATABASE_URL', dbosSystemUrl(shownPostgres(st))],
    ['DBOS_APPLICATION_NAME', st.applicationName],
    ['REDIS_URL', st.redis.url ? shownRedis(st.redis.url, st.redis.kind) : undefined],
    ['REDIS_KEY_PREFIX', st.redis.url ? env.REDIS_KEY_PREFIX : undefined],
    ['DBOS_SYSTEM_SCHEMA', env.DBOS_SYSTEM_SCHEMA && env.DBOS_SYSTEM_SCHEMA !== 'dbos' ? env.DBOS_SYSTEM_SCHEMA : undefined],
    ['AFTERLIFE_SCHEMA', env.AFTERLIFE_SCHEMA && env.AFTERLIFE_SCHEMA !== 'afterlife' ? env.AFTERLIFE_SCHEMA : undefined],
    st.pubsub.kind === 'emulator' ? ['PUBSUB_EMULATOR_HOST', st.pubsub.host] : ['PUBSUB_BRIDGE_URL', st.pubsub.url],
    ['GOOGLE_CLOUD_PROJECT', st.project],
    ['EXECUTOR_DEATH_TOPIC', st.deathTopic !== 'executor-deaths' ? st.deathTopic : undefined],
  ];
  return `export ${vars.flatMap(([k, v]) => (v === undefined || v === '' ? [] : [`${k}=${shellQuote(v)}`])).join(' ')}`;
}

/** Single-quoted for a POSIX shell: a quote inside is closed, escaped and reopened. */
function shellQuote(v: string): string {
  return `'${v.replace(/'/g, `'\\''`)}'`;
}
