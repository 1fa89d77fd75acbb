import { createRequire } from 'node:module';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * HTTP answers the functions give before their handler runs. functions-framework parses the body (JSON,
 * text, urlencoded, raw) before any registered function sees the request, and a body its JSON parser
 * rejects goes to Express's final handler, which answers with an HTML page. Every caller of afterlife
 * (Scheduler, Eventarc, a deploy script) reads JSON, so the final handler of the framework's own Express
 * instance answers JSON instead: `{ error, code }` with the parser's 4xx status.
 */
interface ExpressApplication {
  handle(this: unknown, req: IncomingMessage, res: ServerResponse, callback?: (err?: unknown) => void): void;
}

const PATCHED = Symbol.for('afterlife.jsonFinalHandler');

export function installJsonFinalHandler(): void {
  // The framework's Express, resolved from the framework's own location: that is the instance whose
  // application prototype its server is created from (getServer runs after this module has loaded).
  const ffRequire = createRequire(createRequire(import.meta.url).resolve('@google-cloud/functions-framework'));
  const app = (ffRequire('express') as { application: ExpressApplication & { [PATCHED]?: true } }).application;
  if (app[PATCHED]) return;
  const original = app.handle;
  app.handle = function handle(req, res, callback) {
    original.call(this, req, res, callback ?? ((err?: unknown) => finalJson(res, err)));
  };
  app[PATCHED] = true;
}

export function finalJson(res: ServerResponse, err: unknown): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const { status, body } = finalAnswer(err);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(body));
}

function finalAnswer(err: unknown): { status: number; body: { error: string; code: string } } {
  if (err === undefined || err === null) return { status: 404, body: { error: 'no such route', code: 'not_found' } };
  const e = err as { status?: unknown; statusCode?: unknown; type?: unknown; expose?: unknown; message?: unknown };
  const raw = typeof e.status === 'number' ? e.status : typeof e.statusCode === 'number' ? e.statusCode : 500;
  const status = raw >= 400 && raw < 600 ? raw : 500;
  if (status >= 500) return { status, body: { error: 'internal error', code: 'internal' } };
  // body-parser's types: entity.parse.failed, entity.too.large, encoding.unsupported, charset.unsupported…
  const code = typeof e.type === 'string' ? e.type.replace(/[^a-z0-9]+/gi, '_') : 'bad_request';
  const error = code === 'entity_parse_failed' ? 'the body is not valid JSON' : e.expose === true && typeof e.message === 'string' ? e.message : 'bad request';
  return { status, body: { error, code } };
}
