import { hostname } from 'node:os';
import { z } from 'zod';
import { classify } from '../../shared/errors.js';
import { runReaper, type ReaperDeps, type ReaperSummary } from '../../shared/reaper/index.js';
import { httpTraceFields, type Logger } from '../../shared/log.js';
import type { Runtime } from '../../shared/runtime.js';
import { forkHooks } from './fork.js';

/**
 * Cloud Scheduler → POST → one reaper invocation → 200 with the JSON summary. `skipped` (another reaper
 * holds the lease) is a 200 too: Scheduler must not retry it. Bad input is a 400 that says what is wrong;
 * a transient failure (database busy or down) is a 503 so Scheduler's retry policy applies.
 */
export const ReaperRequest = z
  .object({
    dryRun: z.boolean().optional(),
    maxTicks: z.number().int().min(1).max(10_000).optional(),
    /** Who called (Terraform's Scheduler job sends "cloud-scheduler"); logged, never acted on. */
    source: z.string().min(1).max(100).optional(),
  })
  .strict();
export type ReaperRequest = z.infer<typeof ReaperRequest>;

export interface HttpAnswer {
  status: number;
  body: ReaperSummary | { error: string; issues?: string[] };
}

export function reaperDeps(rt: Runtime, logger: Logger = rt.logger): ReaperDeps {
  return {
    config: rt.config,
    db: rt.db,
    redis: rt.redis,
    lock: rt.lock,
    publisher: rt.publisher,
    logger,
    faults: rt.faults,
    clock: rt.clock,
    detectedBy: `reaper@${hostname()}:${process.pid}`,
    ...forkHooks(rt),
  };
}

export async function handleReaperRequest(
  rt: Runtime,
  req: { method: string; query?: Record<string, unknown>; body?: unknown; headers?: unknown },
  deps?: ReaperDeps,
): Promise<HttpAnswer> {
  const started = rt.clock();
  const log = rt.logger.child(httpTraceFields(rt.config.project, req.headers));
  const d = deps ?? reaperDeps(rt, log);
  if (req.method !== 'POST') return { status: 405, body: { error: 'use POST' } };
  const parsed = ReaperRequest.safeParse(requestFields(req));
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`);
    return { status: 400, body: { error: 'invalid reaper request', issues } };
  }
  try {
    const { source, ...request } = parsed.data;
    if (source) log.debug('reaper invoked', { source });
    // Tracked, so a SIGTERM mid-tick lets the reaper stop at its boundary and release its lease before
    // the pool and Redis close.
    const summary = await rt.lifecycle.track(runReaper(d, { ...request, startedAt: started, signal: rt.lifecycle.signal, standby: true }));
    return { status: 200, body: summary };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    log.error('reaper invocation failed', { err, event: 'reaper_failed' });
    return { status: classify(err) === 'retry' ? 503 : 500, body: { error: message } };
  }
}

/** Scheduler sends a JSON body; operators may use `?dryRun=true`. An empty body means defaults. */
function requestFields(req: { query?: Record<string, unknown>; body?: unknown }): unknown {
  const body = req.body === undefined || req.body === '' || (Buffer.isBuffer(req.body) && req.body.length === 0) ? {} : req.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const fromQuery: Record<string, unknown> = {};
  if (req.query?.dryRun !== undefined) fromQuery.dryRun = req.query.dryRun === 'true' || req.query.dryRun === '1';
  return { ...fromQuery, ...(body as Record<string, unknown>) };
}
