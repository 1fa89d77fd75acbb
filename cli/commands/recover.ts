import { hostname, userInfo } from 'node:os';
import { deathNotice, pendingByVersion } from '../../packages/executor/src/plane/index.js';
import { checkDbosSchema } from '../../shared/dbos/schema.js';
import { isAlive } from '../../shared/recovery/alive.js';
import { recoveryDeps } from '../../shared/recovery/deps.js';
import { recoverExecutor, type RecoverySummary } from '../../shared/recovery/recoverExecutor.js';
import type { CliContext } from '../context.js';
import { duration, inline } from '../format.js';
import type { RecoverOutput } from '../schemas.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife-plane recover <executorId> [--dry-run] [--force]`: the same recovery executorDeath runs (lock or
 * degraded → mark dead → DBOS's recovery statement in batches → audit), from an operator's terminal.
 * Refuses an executor that holds its liveness lock or whose heartbeat is fresh unless --force: recovering
 * live work runs steps twice.
 */
export async function recover(
  ctx: CliContext,
  executorId: string,
  o: { dryRun: boolean; force: boolean },
): Promise<CommandResult<RecoverOutput>> {
  const { db, config } = ctx;
  const app = config.applicationName;
  await checkDbosSchema(db);
  const pending = await pendingByVersion(db, app, executorId);
  const byVersion = Object.fromEntries(pending.map((p) => [p.applicationVersion ?? '(none)', p.count]));
  const total = pending.reduce((n, p) => n + p.count, 0);
  const owns = `${total} PENDING workflow(s)${total ? ` (${describe(byVersion)})` : ''}`;
  const base: Pick<RecoverOutput, 'command' | 'applicationName' | 'executorId' | 'pendingByVersion'> = {
    command: 'recover',
    applicationName: app,
    executorId,
    pendingByVersion: byVersion,
  };
  const nothing = { reenqueued: 0, recoveryId: null, lockMode: null, durationMs: null, versionsWithoutExecutor: [] };
  // The same check as the real run, so a dry run says whether the real one would be refused.
  const refused = await refusal(ctx, executorId, o.force);
  if (o.dryRun) {
    const out: RecoverOutput = { ...base, dryRun: true, outcome: 'dry-run', ...nothing, wouldRefuse: refused ?? null };
    const verdict = refused ? `the real run would be refused: ${refused}` : 'the real run would recover them';
    return { json: out, text: `${inline(executorId)} owns ${owns}; dry run: nothing changed; ${inline(verdict)}\n`, exitCode: 0 };
  }
  if (refused) throw new Error(refused);
  ctx.progress(`recovering ${inline(executorId)}: ${owns}…`);
  const summary = await runRecovery(ctx, executorId, total);
  if (summary.outcome === 'false-alarm') {
    return {
      json: { ...base, dryRun: false, outcome: 'false-alarm', ...nothing },
      text: `${inline(executorId)} is alive (fresh heartbeat); nothing recovered.\n`,
      exitCode: 0,
    };
  }
  const { outcome, reenqueued, recoveryId, lockMode, durationMs, versionsWithoutExecutor } = summary;
  const out: RecoverOutput = { ...base, dryRun: false, outcome, reenqueued, recoveryId, lockMode, durationMs, versionsWithoutExecutor };
  return { json: out, text: describeRecovery(executorId, summary), exitCode: 0 };
}

/** The recovery executorDeath runs, as a `manual` notice from this terminal, with a progress line per batch. */
async function runRecovery(ctx: CliContext, executorId: string, total: number): Promise<RecoverySummary> {
  const { db, config } = ctx;
  let moved = 0;
  return recoverExecutor(
    recoveryDeps(
      {
        config,
        db,
        redis: ctx.redisReady ? ctx.redis : undefined,
        lock: ctx.redisReady ? ctx.lock : undefined,
        logger: ctx.logger,
        clock: Date.now,
      },
      { via: 'cli', recoveredBy: `cli:${safeUser()}@${hostname()}` },
    ),
    deathNotice({ executorId, applicationName: config.applicationName, reason: 'manual', detectedBy: 'afterlife-cli' }),
    {
      onBatch: ({ batchNo, reenqueued }) => {
        moved += reenqueued;
        ctx.progress(`  batch ${batchNo}: re-enqueued ${reenqueued} (${moved}/${total})`);
      },
    },
  );
}

function describeRecovery(executorId: string, summary: Exclude<RecoverySummary, { outcome: 'false-alarm' }>): string {
  const lines = [
    `recovery #${summary.recoveryId}: re-enqueued ${summary.reenqueued} workflow(s) of ${inline(executorId)} in ${summary.batches} batch(es), ${duration(summary.durationMs)} (${summary.lockMode}).`,
  ];
  if (summary.lockMode === 'degraded') lines.push('warning: ran without the Redis lock (degraded); Postgres still fenced every write.');
  if (summary.versionsWithoutExecutor.length) {
    lines.push(
      `warning: no live executor runs version(s) ${summary.versionsWithoutExecutor.join(', ')}: those workflows wait until one does.`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * The operator's side of the shared rule (shared/recovery/alive.ts): only evidence of death goes ahead
 * without --force, so no heartbeat to read is a refusal too. The reason to refuse, or undefined.
 */
async function refusal(ctx: CliContext, executorId: string, force: boolean): Promise<string | undefined> {
  const { db, config } = ctx;
  const life = await isAlive(
    {
      db,
      redis: ctx.redisReady ? ctx.redis : undefined,
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      clock: Date.now,
      ...(config.redis ? { keyPrefix: config.redis.keyPrefix } : {}),
    },
    { applicationName: config.applicationName, executorId, reason: 'manual', force, doubt: 'refuse' },
  );
  if (life.alive === false) return undefined;
  if (life.witness === 'liveness-lock') {
    // Postgres's word, Redis or not: the process still has its session.
    return `${executorId} holds its liveness lock (its process still has a Postgres session): it is alive, and recovering its workflows would run their steps twice. Use --force if you are sure it is gone (a live executor fences itself and exits).`;
  }
  if (life.alive === 'unknown') {
    return `cannot read ${executorId}'s heartbeat (Redis ${config.redis ? 'unreachable' : 'not configured'}), so there is no evidence it is gone. Use --force if you are sure it is.`;
  }
  return `${executorId} has a fresh heartbeat (state ${life.state ?? 'unknown'}): it is alive, and recovering its workflows would run their steps twice. Use --force if you are sure it is gone.`;
}

function describe(byVersion: Record<string, number>): string {
  return Object.entries(byVersion)
    .map(([v, n]) => `${v}: ${n}`)
    .join(', ');
}

function safeUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
