/**
 * bench/livenessCost — what each word the kit says on its liveness session costs the server: the empty query
 * that renews the lease, the fence question (named, as the kit asks it, and unnamed, as it was asked), and the
 * backend comparison (sessionProbe.ts). On a private embedded PostgreSQL (never the shared one), one session
 * per kind, `--words` of each back to back; the server CPU is the backend process's own (utime + stime from
 * /proc), so other work on the machine changes the wall time, not the figure.
 *
 *   node dist/bench/livenessCost.js [--words 20000] [--json]
 */
import pg from 'pg';
import { z } from 'zod';
import { parseFlags } from './args.js';
import { createDb } from '../packages/executor/src/db/pool.js';
import { askFence, backendIdentity } from '../packages/executor/src/db/queries/liveness.js';
import { fenceCheckQuery } from '../packages/executor/src/db/queries/liveness.js';
import { registerAlive } from '../packages/executor/src/db/queries/executors.js';
import { consoleLogger } from '../packages/executor/src/log.js';
import { migrate } from '../shared/db/migrate.js';
import { startPrivatePostgres } from '../test/helpers/postgresServer.js';
import { cpuSeconds } from './fleetStats.js';

const Args = z
  .object({ words: z.coerce.number().int().min(100).max(1_000_000).default(20_000), json: z.boolean().default(false) })
  .strict();
const args = parseFlags('livenessCost', Args, process.argv.slice(2));

const APP = 'cost-app';
const EXECUTOR = 'cost-exec';

interface Word {
  name: string;
  say: (c: pg.Client) => Promise<unknown>;
}

const since = new Date();
const who = { applicationName: APP, executorId: EXECUTOR, since, incarnation: 'inc-cost' };
const words: Word[] = [
  { name: 'empty query (the renewal)', say: (c) => c.query('') },
  { name: 'fence question, named (as the kit asks it)', say: (c) => askFence(c, 'afterlife', who) },
  {
    name: 'fence question, unnamed (parsed and planned each time)',
    say: (c) => {
      const q = fenceCheckQuery('afterlife', who);
      return c.query(q.text, q.values);
    },
  },
  { name: 'backend comparison (every 5th fence question)', say: (c) => backendIdentity(c) },
];

async function main(): Promise<Array<{ word: string; serverUsPerWord: number; clientUsPerWord: number }>> {
  const server = await startPrivatePostgres();
  const pool = new pg.Pool({ connectionString: server.url, max: 2 });
  const log = consoleLogger({ component: 'bench-liveness-cost' }, 'WARNING');
  const db = createDb(pool, 2, { dbosSchema: 'dbos', afterlifeSchema: 'afterlife', logger: log });
  const out: Array<{ word: string; serverUsPerWord: number; clientUsPerWord: number }> = [];
  try {
    await migrate(db);
    await registerAlive(db, {
      applicationName: APP,
      executorId: EXECUTOR,
      applicationVersion: 'v1',
      startedAt: since,
      heartbeats: true,
      liveness: true,
      incarnation: 'inc-cost',
    });
    for (const w of words) {
      const c = new pg.Client({ connectionString: server.url });
      await c.connect();
      try {
        const pid = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? 0;
        for (let i = 0; i < 200; i++) await w.say(c);
        const s0 = cpuSeconds(pid) ?? NaN;
        const c0 = process.cpuUsage();
        for (let i = 0; i < args.words; i++) await w.say(c);
        const s1 = cpuSeconds(pid) ?? NaN;
        const c1 = process.cpuUsage(c0);
        out.push({
          word: w.name,
          serverUsPerWord: Math.round(((s1 - s0) / args.words) * 1e7) / 10,
          clientUsPerWord: Math.round(((c1.user + c1.system) / args.words) * 10) / 10,
        });
      } finally {
        await c.end();
      }
    }
  } finally {
    await pool.end();
    await server.stop();
  }
  return out;
}

main().then(
  (r) => {
    if (args.json) console.log(JSON.stringify(r));
    else for (const x of r) console.log(`${x.word}: ${x.serverUsPerWord} µs of server CPU, ${x.clientUsPerWord} µs of the kit's`);
    process.exit(0);
  },
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
