import { AfterlifeError, classify, errorMessage, httpTraceFields, InvalidInputError } from '../../packages/executor/src/plane/index.js';
import { type DrainDeps, DrainPostBody, DrainQuery, drainProgress, parse, requestDrain } from '../../shared/drain/index.js';
import type { Runtime } from '../../shared/runtime.js';

/**
 * Method and input → shared/drain → an HTTP status. 400 names the bad field; "retry later" failures
 * (database budget, connection loss) are 503; an unknown version is an empty report, not an error.
 */
export interface HttpOutcome {
  status: number;
  body: unknown;
}

export async function handleDrainRequest(
  rt: Runtime,
  req: { method: string; body: unknown; query: unknown; headers?: unknown },
): Promise<HttpOutcome> {
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
      let written;
      try {
        written = await rt.lifecycle.track(requestDrain(deps, body, 'drain-function'));
      } catch (err) {
        if (classify(err) !== 'retry' || err instanceof InvalidInputError) throw err;
        // Turned away before a connection (the budget): certainly nothing written. Otherwise the INSERT
        // may have committed before the connection failed; a repeat is harmless (the kit acts on the
        // earliest request of its target).
        const certain = err instanceof AfterlifeError && err.code === 'db_busy';
        log.warn('drain request not confirmed; retry later', { reason: errorMessage(err), written: certain ? false : 'unknown' });
        return {
          status: 503,
          body: {
            error: certain
              ? 'temporarily unavailable; nothing was written, retry later'
              : 'the drain request may or may not have been written; repeating it is safe',
            code: certain ? (err as AfterlifeError).code : 'write_unconfirmed',
            written: certain ? false : 'unknown',
          },
        };
      }
      // The requests are written: the answer is 202 whatever the progress read does next.
      const progress = await drainProgress(deps, written.target).catch((err: unknown) => {
        log.warn('drain requested, but its progress could not be read', { reason: errorMessage(err) });
        return undefined;
      });
      return {
        status: 202,
        body: progress
          ? { ...progress, written: true, requestIds: written.requestIds, budgetMs: written.budgetMs }
          : {
              written: true,
              requestIds: written.requestIds,
              budgetMs: written.budgetMs,
              progress: 'unavailable; GET ?applicationVersion= for it',
            },
      };
    }
    if (req.method === 'GET') {
      const q = parse(DrainQuery, req.query, 'query');
      return { status: 200, body: await drainProgress(deps, { applicationVersion: q.applicationVersion }) };
    }
    return {
      status: 405,
      body: { error: 'use POST to request a drain or GET ?applicationVersion= for progress', code: 'method_not_allowed' },
    };
  } catch (err) {
    if (err instanceof InvalidInputError) return { status: 400, body: { error: err.message, code: 'invalid_input', issues: err.issues } };
    const reason = errorMessage(err);
    if (classify(err) === 'retry') {
      log.warn('drain request failed; retry later', { reason });
      return { status: 503, body: { error: 'temporarily unavailable; retry later', code: codeOf(err) } };
    }
    log.error('drain request failed', { err, event: 'drain_failed' });
    return { status: 500, body: { error: 'internal error', code: 'internal' } };
  }
}

function codeOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Za-z0-9_]{1,40}$/.test(code) ? code : 'retry_later';
}
