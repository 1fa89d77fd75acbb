/**
 * bench/pythonIdle — what one idle Python executor (DBOS Transact for Python 2.30.0 with the Python kit,
 * test/fixtures/python/kit_app.py) costs Postgres: the statements its kit sends a second, the empty queries
 * that renew its lease, and the server CPU of each of its sessions. On a private embedded PostgreSQL (never
 * the shared one) with pg_stat_statements loaded and every message logged with its session's name
 * (log_min_duration_statement = 0: an empty query, which pg_stat_statements never sees, is counted too, and
 * the log tells a prepared statement's execute from a statement parsed every time).
 * The server CPU is each backend's own (utime + stime from /proc), so other work on the machine changes the
 * wall time, not the figure. Needs ../shared/python (setup.sh) and the shared Redis (REDIS_URL).
 *
 *   npm run build && node dist/bench/pythonIdle.js [--seconds 60] [--kit-src DIR] [--json]
 *
 * `--kit-src`: the kit's source to run instead of this checkout's packages/executor-python/src (another
 * revision's, `git archive`d, for a before-and-after on the same machine).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import pg from 'pg';
import { z } from 'zod';
import { parseFlags } from './args.js';
import { startPythonExecutor } from '../scripts/stack/pythonExecutor.js';
import { startPrivatePostgres } from '../test/helpers/postgresServer.js';
import { cpuSeconds } from './fleetStats.js';

const Args = z
  .object({
    seconds: z.coerce.number().int().min(10).max(3_600).default(60),
    'kit-src': z.string().min(1).optional(),
    json: z.boolean().default(false),
  })
  .strict();
const args = parseFlags('pythonIdle', Args, process.argv.slice(2));

/** The kit's own statements, told from DBOS's by what they read (pg_stat_statements has no session column). */
const KIT_STATEMENT = `(query ILIKE '%afterlife%' OR query ILIKE '%pg_backend_pid%' OR query ILIKE '%idle_session_timeout%')`;

interface Reading {
  seconds: number;
  kitStatementsPerS: number;
  kitStatements: Array<{ query: string; perS: number }>;
  messagesPerS: Record<string, Record<string, number>>;
  serverCpuMsPerS: Record<string, number>;
  load: number[];
}

/** application_name → backend pids of the app's sessions (the bench's own admin session left out). */
async function sessions(admin: pg.Client): Promise<Map<number, string>> {
  const r = await admin.query<{ pid: number; name: string }>(
    `SELECT pid, application_name AS name FROM pg_stat_activity
      WHERE datname = 'afterlife' AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
  );
  return new Map(r.rows.map((x) => [x.pid, x.name.replace(/@.*$/, '@…')]));
}

/**
 * The messages each session sent since `from` bytes of the server log (log_line_prefix is the session's name), by
 * kind: an empty query, a simple-protocol statement, or a parse, bind or execute of a named (prepared) or
 * unnamed statement.
 */
function messages(logDir: string, from: number): { counts: Record<string, Record<string, number>>; size: number } {
  const file = readdirSync(logDir)
    .filter((f) => f.endsWith('.log'))
    .sort()
    .at(-1);
  if (!file) return { counts: {}, size: 0 };
  const text = readFileSync(join(logDir, file), 'utf8');
  const counts: Record<string, Record<string, number>> = {};
  for (const line of text.slice(from).split('\n')) {
    const m = /^(.*?)\|LOG: {2}duration: [\d.]+ ms {2}(?:(statement): (.*)|(parse|bind|execute) ([^:]*):)/.exec(line);
    if (!m) continue;
    const name = (m[1] as string).replace(/@.*$/, '@…');
    const kind = m[2]
      ? m[3] === ''
        ? 'empty query'
        : 'simple statement'
      : `${m[4] as string} ${m[5] === '<unnamed>' ? 'unnamed' : 'named'}`;
    const byKind = (counts[name] ??= {});
    byKind[kind] = (byKind[kind] ?? 0) + 1;
  }
  return { counts, size: text.length };
}

async function main(): Promise<Reading> {
  const server = await startPrivatePostgres({
    settings: {
      shared_preload_libraries: 'pg_stat_statements',
      logging_collector: 'on',
      log_directory: 'log',
      log_min_duration_statement: '0',
      log_line_prefix: '%a|',
    },
  });
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  const app = `bench-pyidle-${randomBytes(3).toString('hex')}`;
  try {
    await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const dataDir = (await admin.query<{ d: string }>("SELECT current_setting('data_directory') AS d")).rows[0]?.d ?? '';
    const logDir = join(dataDir, 'log');
    const e = await startPythonExecutor({
      databaseUrl: server.url,
      applicationName: app,
      executorId: 'idle-1',
      env: {
        REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
        REDIS_KEY_PREFIX: `bench-pyidle-${randomBytes(3).toString('hex')}`,
        AFTERLIFE_PUBLISH: 'none',
        GOOGLE_CLOUD_PROJECT: 'afterlife-bench',
        ...(args['kit-src'] ? { AFTERLIFE_KIT_SRC: args['kit-src'] } : {}),
      },
    });
    try {
      // Past the attach and the first fence questions: the steady state.
      await new Promise((r) => setTimeout(r, 10_000));
      const pids = await sessions(admin);
      await admin.query('SELECT pg_stat_statements_reset()');
      const log0 = messages(logDir, 0).size;
      const cpu0 = new Map([...pids.keys()].map((p) => [p, cpuSeconds(p) ?? NaN]));
      const t0 = Date.now();
      await new Promise((r) => setTimeout(r, args.seconds * 1_000));
      const cpu1 = new Map([...pids.keys()].map((p) => [p, cpuSeconds(p) ?? NaN]));
      const seconds = (Date.now() - t0) / 1_000;
      const sent = messages(logDir, log0).counts;
      const st = await admin.query<{ query: string; calls: string }>(
        `SELECT query, calls::text FROM pg_stat_statements WHERE ${KIT_STATEMENT} AND query NOT ILIKE '%pg_stat_statements%'
          ORDER BY calls DESC`,
      );
      const cpu: Record<string, number> = {};
      for (const [pid, name] of pids) cpu[name] = (cpu[name] ?? 0) + ((cpu1.get(pid) ?? NaN) - (cpu0.get(pid) ?? NaN));
      const per = (n: number) => Math.round((n / seconds) * 1_000) / 1_000;
      return {
        seconds: Math.round(seconds),
        kitStatementsPerS: per(st.rows.reduce((s, r) => s + Number(r.calls), 0)),
        kitStatements: st.rows.map((r) => ({ query: r.query.replace(/\s+/g, ' ').slice(0, 90), perS: per(Number(r.calls)) })),
        messagesPerS: Object.fromEntries(
          Object.entries(sent).map(([session, kinds]) => [session, Object.fromEntries(Object.entries(kinds).map(([k, v]) => [k, per(v)]))]),
        ),
        serverCpuMsPerS: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, Math.round((v / seconds) * 1e5) / 100])),
        load: loadavg().map((l) => Math.round(l * 100) / 100),
      };
    } finally {
      await e.stop();
    }
  } finally {
    await admin.end();
    await server.stop();
  }
}

main().then(
  (r) => {
    if (args.json) console.log(JSON.stringify(r));
    else {
      console.log(`one idle Python executor, ${r.seconds} s, load ${r.load.join(' ')}`);
      console.log(`kit statements: ${r.kitStatementsPerS} a second`);
      for (const s of r.kitStatements) console.log(`  ${s.perS}/s  ${s.query}`);
      for (const [session, kinds] of Object.entries(r.messagesPerS))
        console.log(`messages a second from ${session}: ${JSON.stringify(kinds)}`);
      console.log(`server CPU ms a second, by session: ${JSON.stringify(r.serverCpuMsPerS)}`);
    }
    process.exit(0);
  },
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
