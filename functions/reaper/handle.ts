import { z } from 'zod';
import { classify, errorMessage, httpTraceFields, maskSecrets, pgText } from '../../packages/executor/src/plane/index.js';
import { contractSchema } from '../../shared/contractSchema.js';
import { runReaper, type ReaperDeps, type ReaperSummary } from '../../shared/reaper/index.js';
import type { Runtime } from '../../shared/runtime.js';
import { reaperDeps } from '../../shared/reaper/deps.js';

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
    source: contractSchema(pgText(100)).optional(),
  })
  .strict();
export type ReaperRequest = z.infer<typeof ReaperRequest>;

export interface HttpAnswer {
  status: number;
  body: ReaperSummary | { error: string; code: string; issues?: string[] };
}

export async function handleReaperRequest(
  rt: Runtime,
  req: { method: string; query?: Record<string, unknown>; body?: unknown; headers?: unknown },
  deps?: ReaperDeps,
): Promise<HttpAnswer> {
  const started = rt.clock();
  const log = rt.logger.child(httpTraceFields(rt.config.project, req.headers));
  const d = deps ?? reaperDeps(rt, log);
  if (req.method !== 'POST') return { status: 405, body: { error: 'use POST', code: 'method_not_allowed' } };
  const parsed = parseReaperRequest(req);
  if (!parsed.ok) return { status: 400, body: { error: 'invalid reaper request', code: 'invalid_input', issues: parsed.issues } };
  try {
    const { source, ...request } = parsed.request;
    if (source) log.debug('reaper invoked', { source });
    // Tracked, so a SIGTERM mid-tick lets the reaper stop at its boundary and release its lease before
    // the pool and Redis close.
    const summary = await rt.lifecycle.track(runReaper(d, { ...request, startedAt: started, signal: rt.lifecycle.signal, standby: true }));
    return { status: 200, body: summary };
  } catch (err) {
    const message = errorMessage(err);
    log.error('reaper invocation failed', { err, event: 'reaper_failed' });
    const retry = classify(err) === 'retry';
    const code = (err as { code?: unknown } | null)?.code;
    return {
      status: retry ? 503 : 500,
      body: {
        error: maskSecrets(message),
        code: typeof code === 'string' && /^[A-Za-z0-9_]{1,40}$/.test(code) ? code : retry ? 'retry_later' : 'internal',
      },
    };
  }
}

/** The request from the query and the body together, or every problem with them. */
export function parseReaperRequest(req: {
  query?: Record<string, unknown>;
  body?: unknown;
}): { ok: true; request: ReaperRequest } | { ok: false; issues: string[] } {
  const fields = requestFields(req);
  if (!fields.ok) return fields;
  const parsed = ReaperRequest.safeParse(fields.value);
  if (!parsed.success) return { ok: false, issues: parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`) };
  return { ok: true, request: parsed.data };
}

/**
 * The query an operator may send instead of a body. Each value must be exactly understood: a dry run that
 * silently became a real one (`?dryRun=TRUE`, a repeated key, `dryRun[]=`) is the failure that matters, so
 * anything else — another key, another spelling, a repeat — is a 400.
 */
const ReaperQuery = z
  .object({
    dryRun: z
      .enum(['true', 'false', '1', '0'])
      .transform((v) => v === 'true' || v === '1')
      .optional(),
    maxTicks: z
      .string()
      .regex(/^[1-9][0-9]{0,4}$/, 'must be a decimal integer from 1 to 10000')
      .transform(Number)
      .pipe(z.number().int().min(1).max(10_000))
      .optional(),
  })
  .strict();

/** Scheduler sends a JSON body; operators may use the query instead. An empty body means defaults. */
function requestFields(req: {
  query?: Record<string, unknown>;
  body?: unknown;
}): { ok: true; value: unknown } | { ok: false; issues: string[] } {
  const body = req.body === undefined || req.body === '' || (Buffer.isBuffer(req.body) && req.body.length === 0) ? {} : req.body;
  const q = ReaperQuery.safeParse(req.query ?? {});
  if (!q.success) return { ok: false, issues: q.error.issues.map((i) => `query ${i.path.join('.') || '(query)'}: ${i.message}`) };
  const fromQuery = Object.fromEntries(Object.entries(q.data).filter(([, v]) => v !== undefined));
  if (typeof body !== 'object' || body === null || Array.isArray(body) || Buffer.isBuffer(body)) {
    return Object.keys(fromQuery).length ? { ok: false, issues: ['(body): must be a JSON object'] } : { ok: true, value: body };
  }
  const both = Object.keys(fromQuery).filter((k) => k in body);
  if (both.length) return { ok: false, issues: both.map((k) => `${k}: given in both the query and the body; give it once`) };
  return { ok: true, value: { ...fromQuery, ...(body as Record<string, unknown>) } };
}
