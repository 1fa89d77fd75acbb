/**
 * bench/fleet's reaper (issue 31): the reaper function's own code path (createRuntime from the environment,
 * reaperDeps, runReaper as a standby, as functions/reaper/handle.ts calls it) driven the way Terraform
 * deploys it: Cloud Scheduler starts an invocation every 60 s, each runs FUNCTION_TIMEOUT_S 150 s on an
 * instance of its own (so ~2.5 are alive at once: one ticking, the others waiting for the lease), every
 * other setting at its default. Three instances, each its own Runtime (pool of DB_POOL_MAX), as Cloud Run
 * would run them. What it adds: each tick's duration and the time its statements spent in Postgres, sent to
 * the parent over IPC.
 */
import { hostname } from 'node:os';
import type { Db } from '../packages/executor/src/db/pool.js';
import { reaperDeps } from '../shared/reaper/deps.js';
import { runReaper } from '../shared/reaper/index.js';
import { SWEEP_PASS_NAMES, type SweepPassName } from '../shared/reaper/types.js';
import { createRuntime, type Runtime } from '../shared/runtime.js';

export const SCHEDULE_MS = Number(process.env.FLEET_SCHEDULE_MS ?? '60000');
const INSTANCES = 3;

export interface TickMessage {
  event: 'tick';
  instance: number;
  /** The first tick of its invocation: the one that reads the whole fleet (shared/reaper/fleetView.ts). */
  first: boolean;
  ms: number;
  deadMs: number;
  /** Each sweep pass's time this tick (0 when it was not due): what a long tick spent where. */
  passMs: Record<SweepPassName, number>;
  dbMs: number;
  queries: number;
  candidates: number;
  alive: number;
  declared: string[];
}

/** The runtime's Db, with the time its statements take summed per tick (client side: wait + round trip). */
function timedDb(db: Db, acc: { ms: number; n: number }): Db {
  const timed = Object.create(db) as Db;
  timed.query = async (...args: Parameters<Db['query']>) => {
    const t0 = performance.now();
    try {
      return (await db.query(...args)) as never;
    } finally {
      acc.ms += performance.now() - t0;
      acc.n += 1;
    }
  };
  return timed;
}

async function invoke(rt: Runtime, instance: number, stopping: AbortSignal): Promise<void> {
  const acc = { ms: 0, n: 0 };
  let tickNo = 0;
  const deps = { ...reaperDeps(rt), db: timedDb(rt.db, acc), detectedBy: `fleet-reaper-${instance}@${hostname()}` };
  await runReaper(deps, {
    startedAt: rt.clock(),
    standby: true,
    signal: stopping,
    onTick: (r) => {
      const dead = r.dead;
      const msg: TickMessage = {
        event: 'tick',
        instance,
        first: tickNo++ === 0,
        ms: r.durationMs,
        deadMs: dead.durationMs,
        passMs: Object.fromEntries(SWEEP_PASS_NAMES.map((p) => [p, r[p].durationMs])) as Record<SweepPassName, number>,
        dbMs: Math.round(acc.ms * 100) / 100,
        queries: acc.n,
        candidates: dead.kind !== 'ran' ? -1 : dead.candidates,
        alive: dead.kind !== 'ran' ? -1 : dead.alive,
        declared: dead.kind !== 'ran' ? [] : dead.declared,
      };
      acc.ms = 0;
      acc.n = 0;
      process.send?.(msg);
    },
  }).catch((err: unknown) => process.send?.({ event: 'failed', error: String(err) }));
}

async function main(): Promise<void> {
  const runtimes = await Promise.all(
    Array.from({ length: INSTANCES }, (_, i) => createRuntime({ publisher: 'none', sessionName: `afterlife_reaper_${i}` })),
  );
  const stopping = new AbortController();
  const running = new Set<Promise<void>>();
  let k = 0;
  const fire = () => {
    const instance = k++ % INSTANCES;
    const p = invoke(runtimes[instance] as Runtime, instance, stopping.signal).finally(() => running.delete(p));
    running.add(p);
  };
  fire();
  const timer = setInterval(fire, SCHEDULE_MS);
  process.send?.({ event: 'ready' });
  process.on('message', (m: { cmd?: string }) => {
    if (m.cmd !== 'stop') return;
    clearInterval(timer);
    stopping.abort();
    void (async () => {
      await Promise.all(running);
      await Promise.all(runtimes.map((rt) => rt.lifecycle.shutdown()));
      process.exit(0);
    })();
  });
}

await main();
