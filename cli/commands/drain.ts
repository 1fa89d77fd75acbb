import { findExecutors } from '../../packages/executor/src/plane/index.js';
import { type DrainDeps, type DrainProgress, drainProgress, requestDrain } from '../../shared/drain/index.js';
import type { CliContext } from '../context.js';
import { ago, duration, table } from '../format.js';
import type { DrainOutput } from '../schemas.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife-plane drain --version V [--wait] [--timeout-s S]`: writes drain requests for every executor of V
 * (the kit picks them up on its next beat, drains, and publishes a death notice for what is left) and
 * reports progress; with --wait it follows until every executor is drained or dead and nothing of V is
 * PENDING, printing progress on stderr. A wait that times out exits 1 with the last progress.
 */
export async function drain(
  ctx: CliContext,
  o: { version: string; wait: boolean; timeoutS: number; pollMs?: number },
): Promise<CommandResult<DrainOutput>> {
  const deps: DrainDeps = {
    db: ctx.db,
    redis: ctx.redisReady ? ctx.redis : undefined,
    ...(ctx.config.redis ? { keyPrefix: ctx.config.redis.keyPrefix } : {}),
    logger: ctx.logger,
    applicationName: ctx.config.applicationName,
    defaultBudgetMs: ctx.config.drainBudgetMs,
  };
  const started = Date.now();
  // Executors of the version already dead in the registry before the request are not asked to drain: left
  // out of the count, the wait and the table, or the report counts corpses among those "requested".
  const before = await findExecutors(ctx.db, ctx.config.applicationName, { applicationVersion: o.version });
  const gone = new Set(before.filter((r) => r.state === 'dead').map((r) => r.executor_id));
  const without = (p: DrainProgress): DrainProgress => ({ ...p, executors: p.executors.filter((e) => !gone.has(e.executorId)) });
  const requested = await requestDrain(deps, { applicationVersion: o.version }, 'afterlife-cli');
  let progress = without(await drainProgress(deps, requested.target));
  ctx.progress(
    `drain of ${o.version} requested for ${progress.executors.length} executor(s) (budget ${duration(requested.budgetMs)})${gone.size ? `; ${gone.size} dead one(s) of the version left out` : ''}`,
  );
  let timedOut = false;
  if (o.wait) {
    let last = '';
    for (;;) {
      const line = describe(progress);
      if (line !== last) {
        ctx.progress(`${duration(Date.now() - started).padStart(6)}  ${line}`);
        last = line;
      }
      if (progress.done) break;
      if (Date.now() - started > o.timeoutS * 1000) {
        timedOut = true;
        break;
      }
      await new Promise((r) => setTimeout(r, o.pollMs ?? 1_000));
      progress = without(await drainProgress(deps, { applicationVersion: o.version }));
    }
  }
  const out: DrainOutput = {
    command: 'drain',
    applicationName: progress.applicationName,
    applicationVersion: o.version,
    requestIds: requested.requestIds,
    budgetMs: requested.budgetMs,
    waited: o.wait,
    timedOut,
    waitedMs: o.wait ? Date.now() - started : 0,
    done: progress.done,
    pending: progress.pending,
    enqueued: progress.enqueued,
    heartbeatsKnown: progress.heartbeatsKnown,
    executors: progress.executors,
  };
  const head = o.wait
    ? progress.done
      ? `drain of ${o.version} done in ${duration(out.waitedMs)}: every executor drained or dead, nothing PENDING.`
      : `drain of ${o.version} NOT done after ${o.timeoutS} s: ${describe(progress)}`
    : `drain of ${o.version} requested (${requested.requestIds.length} request(s)); follow with --wait or \`afterlife-plane status\`.`;
  const rows = progress.executors.map((e) => [
    e.executorId,
    e.state,
    e.applicationVersion ?? '-',
    ago(e.heartbeatAgeMs),
    e.inFlight === null ? '-' : String(e.inFlight),
    String(e.pending),
  ]);
  const text = `${head}\n${rows.length ? `\n${table(['EXECUTOR', 'STATE', 'VERSION', 'HEARTBEAT', 'IN-FLIGHT', 'PENDING'], rows)}\n` : ''}`;
  return { json: out, text, exitCode: timedOut ? 1 : 0 };
}

function describe(p: DrainProgress): string {
  const states = new Map<string, number>();
  for (const e of p.executors) states.set(e.state, (states.get(e.state) ?? 0) + 1);
  const s = [...states].map(([k, n]) => `${n} ${k}`).join(', ');
  return `${p.executors.length} executor(s)${s ? ` (${s})` : ''}, ${p.pending} PENDING, ${p.enqueued} ENQUEUED on the version${p.heartbeatsKnown ? '' : ' (heartbeats unreadable)'}`;
}
