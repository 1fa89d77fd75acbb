/**
 * Question: how long does a recovery batch hold its row locks when the database's disk is busy, and what
 * does waiting for the WAL flush between batches (shared/dbos/walFlush.ts) change?
 *
 * N orphans (bench/orphans.ts, the recovery bench's shape), one template cloned per run. Each run moves
 * them with the shipped batch statement (`reenqueueBatch`, batches of 1,000), alternating two ways: with
 * recoverExecutor's wait between batches, and without it. With `--busy` (the default) a writer keeps the
 * disk busy during every timed run: `dd` writing 512 MB and fdatasync-ing it, over and over, in `--dir`,
 * which must be on the database's disk (here /tmp and Postgres's data share one filesystem). Per way it
 * prints the median total, the time spent waiting, the batches over 100 ms and the longest batch.
 *
 *   npm run bench:busydisk -- [--orphans 1000000] [--reps 2] [--quiet] [--dir /tmp]
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { type BatchCursor, pendingByVersion, reenqueueBatch } from '../shared/dbos/recovery.js';
import { readWalPosition, waitForWalFlush, type WalPosition } from '../shared/dbos/walFlush.js';
import { admin, afterlifeDb, cloneDatabase, createDbosDatabase, dropDatabase, median, ms } from './lib.js';
import { APP, seedOrphans } from './orphans.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string) => (args.includes(name) ? (args[args.indexOf(name) + 1] ?? dflt) : dflt);
const N = Number(opt('--orphans', '1000000'));
const REPS = Number(opt('--reps', '2'));
const BUSY = !args.includes('--quiet');
const DIR = opt('--dir', tmpdir());
const SLOW_MS = 100;

function busyDisk(): { stop: () => Promise<void> } {
  const file = join(DIR, `afterlife-busy-disk-${process.pid}`);
  const child: ChildProcess = spawn('sh', ['-c', `while :; do dd if=/dev/zero of='${file}' bs=1M count=512 conv=fdatasync status=none; done`], {
    stdio: 'ignore',
    detached: true,
  });
  return {
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
      await exited;
      rmSync(file, { force: true });
    },
  };
}

async function run(url: string, wait: boolean): Promise<{ total: number; waited: number; slow: number; longest: number }> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const db = afterlifeDb(pool, 1);
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO afterlife.recoveries (application_name, executor_id, reason, detected_by, recovered_by, lock_mode)
     VALUES ($1, 'dead-1', 'manual', 'bench', 'bench', 'locked') RETURNING id::text`,
    [APP],
  );
  const v1 = (await pendingByVersion(db, APP, 'dead-1')).find((p) => p.applicationVersion === 'v1');
  if (!v1) throw new Error('no PENDING rows of dead-1/v1');
  let after: BatchCursor | undefined;
  let previousEnd: WalPosition | undefined;
  let unscanned = v1.count;
  let moved = 0;
  let batchNo = 0;
  let waited = 0;
  const batchMs: number[] = [];
  const t = process.hrtime.bigint();
  for (;;) {
    const s = process.hrtime.bigint();
    const batch = await reenqueueBatch(db, { applicationName: APP, executorId: 'dead-1', applicationVersion: 'v1' }, {
      limit: 1000,
      range: v1.created,
      after,
      recoveryId: Number(rows[0]?.id),
      batchNo: ++batchNo,
      unscanned,
    });
    batchMs.push(ms(s));
    unscanned -= batch.candidates;
    moved += batch.ids.length;
    if (!batch.next) break;
    after = batch.next;
    if (wait) waited += await waitForWalFlush(() => readWalPosition(db), previousEnd, batch.wal);
    previousEnd = batch.wal;
  }
  const total = ms(t);
  await pool.end();
  if (moved !== N) throw new Error(`moved ${moved} rows, expected ${N}`);
  return { total, waited, slow: batchMs.filter((x) => x > SLOW_MS).length, longest: Math.max(...batchMs) };
}

const template = `afterlife_busy_tpl_${process.pid}`;
const t0 = process.hrtime.bigint();
await seedOrphans(await createDbosDatabase(template), N);
console.error(`seeded ${N} orphans + ${4 * N} other rows in ${(ms(t0) / 1000).toFixed(1)} s; disk ${BUSY ? `kept busy in ${DIR}` : 'quiet'}`);
const results = new Map<string, Array<Awaited<ReturnType<typeof run>>>>([
  ['without the wait', []],
  ['with the wait (shipped)', []],
]);
for (let r = 0; r < REPS; r++) {
  for (const [way, out] of results) {
    const name = `afterlife_busy_run_${process.pid}`;
    const url = await cloneDatabase(template, name);
    await admin((c) => c.query('CHECKPOINT'));
    const writer = BUSY ? busyDisk() : undefined;
    try {
      out.push(await run(url, way !== 'without the wait'));
    } finally {
      await writer?.stop();
    }
    const last = out.at(-1);
    if (last) console.error(`${way}: ${last.total.toFixed(0)} ms, waited ${last.waited.toFixed(0)} ms, ${last.slow} batches over ${SLOW_MS} ms, longest ${last.longest.toFixed(0)} ms`);
    await dropDatabase(name);
  }
}
await dropDatabase(template);
console.log(`| way (${N.toLocaleString('en')} orphans, ${REPS} runs, disk ${BUSY ? 'busy' : 'quiet'}) | total (median) | waiting between batches (median) | batches over ${SLOW_MS} ms (per run) | longest batch (max) |`);
console.log('|---|---|---|---|---|');
for (const [way, out] of results) {
  console.log(
    `| ${way} | ${median(out.map((o) => o.total)).toFixed(0)} ms | ${median(out.map((o) => o.waited)).toFixed(0)} ms | ${out.map((o) => o.slow).join(', ')} | ${Math.max(...out.map((o) => o.longest)).toFixed(0)} ms |`,
  );
}
