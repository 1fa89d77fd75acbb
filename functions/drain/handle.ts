import { classify, InvalidInputError } from '../../shared/errors.js';
import { type DrainDeps, DrainPostBody, DrainQuery, drainProgress, parse, requestDrain } from '../../shared/drain/index.js';
import { httpTraceFields } from '../../shared/log.js';
import type { Runtime } from '../../shared/runtime.js';

/**
 * Method and input → shared/drain → an HTTP status. 400 names the bad field; "retry later" failures
 * (database budget, connection loss) are 503; an unknown version is an empty report, not an error.
 */
export interface HttpOutcome {
  status: number;
  body: unknown;
}

export async function handleDrainRequest(rt: Runtime, req: { method: string; body: unknown; query: unknown; headers?: unknown }): Promise<HttpOutcome> {
  const log = rt.logger.child({ fn: 'drain', ...httpTraceFields(rt.config.project, req.headers) });
  const deps: DrainDeps = {
    db: rt.db,
    redis: rt.redis,
    ...(rt.config.redis ? { keyPrefix: rt.config.redis.keyPrefix } : {}),
    logger: log,
    applicationName: rt.config.applicationName,
    defaultBudgetMs: rt.config.drainBudgetMs,
    clock: rt.clock,
  };
  try {
    if (req.method === 'POST') {
      const body = parse(DrainPostBody, req.body, 'drain request');
      return { status: 202, body: await rt.lifecycle.track(requestDrain(deps, body, 'drain-function')) };
    }
    if (req.method === 'GET') {
      const q = parse(DrainQuery, req.query, 'query');
      return { status: 200, body: await drainProgress(deps, { applicationVersion: q.applicationVersion }) };
    }
    return { status: 405, body: { error: 'use POST to request a drain or GET ?applicationVersion= for progress' } };
  } catch (err) {
    if (err instanceof InvalidInputError) return { status: 400, body: { error: err.message, issues: err.issues } };
    const reason = err instanceof Error ? err.message : String(err);
    if (classify(err) === 'retry') {
      log.warn('drain request failed; retry later', { reason });
      return { status: 503, body: { error: 'temporarily unavailable; retry later' } };
    }
    log.error('drain request failed', { err });
    return { status: 500, body: { error: 'internal error' } };
  }
}
