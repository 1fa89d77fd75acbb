import { createRequire } from 'node:module';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

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
    const done = callback ?? ((err?: unknown) => finalJson(res, err));
    const refused = capBody(req);
    if (refused) {
      // Answered without reading the body.
      done(refused);
      return;
    }
    original.call(this, req, res, done);
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
  const error =
    code === 'entity_parse_failed'
      ? 'the body is not valid JSON'
      : e.expose === true && typeof e.message === 'string'
        ? e.message
        : 'bad request';
  return { status, body: { error, code } };
}

/**
 * The largest identity body any function takes: room for Pub/Sub's largest message (10 MB, base64 in a push
 * envelope) so an oversized notice reaches the decoder and is acked as poison instead of redelivered, and
 * under Cloud Run's own 32 MiB.
 */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;
/** The largest compressed body, read or inflated: nobody afterlife serves compresses (Pub/Sub, Eventarc, Scheduler do not). */
export const MAX_INFLATED_BYTES = 1024 * 1024;

/** Shaped as body-parser's own errors (http-errors assigns `status`, `statusCode` and `expose` on it). */
class BodyRefusedError extends Error {
  expose = true;
  statusCode: number;
  constructor(
    message: string,
    public status: 411 | 413,
    readonly type: string,
  ) {
    super(message);
    this.statusCode = status;
  }
}

const tooLarge = (what: string, max: number) => new BodyRefusedError(`${what} larger than ${max} bytes`, 413, 'entity.too.large');

/**
 * functions-framework's body parsers inflate a compressed body up to 1024 MB before any handler runs (a
 * 0.6 MB gzip of zeros is 600 MiB in memory). Before they read a byte: a declared length past
 * MAX_BODY_BYTES is a 413, and an identity body without a declared length a 411 (nothing to bound it by).
 * A compressed body is counted twice as the parser pipes it through its decompressor — the bytes read and
 * the bytes inflated, each stopped at MAX_INFLATED_BYTES with a 413 (the decompressor is destroyed, so
 * nothing more is inflated). Node discards what the client still sends after the answer.
 */
function capBody(req: IncomingMessage): BodyRefusedError | undefined {
  const declared = req.headers['content-length'];
  const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  const compressed = encoding !== 'identity';
  const max = compressed ? MAX_INFLATED_BYTES : MAX_BODY_BYTES;
  if (declared !== undefined && Number(declared) > max) return tooLarge('request body', max);
  if (!compressed) {
    if (declared === undefined && req.headers['transfer-encoding'] !== undefined)
      return new BodyRefusedError('a request body needs a Content-Length', 411, 'length.required');
    return undefined;
  }
  const pipe = req.pipe.bind(req) as (dest: NodeJS.WritableStream, opts?: { end?: boolean }) => NodeJS.WritableStream;
  req.pipe = ((dest: NodeJS.WritableStream & Partial<Duplex>, opts?: { end?: boolean }) => {
    let read = 0;
    let inflated = 0;
    const stop = (what: string) => {
      req.unpipe(dest);
      dest.destroy?.(tooLarge(what, MAX_INFLATED_BYTES));
    };
    req.on('data', (c: Buffer) => {
      read += c.length;
      if (read > MAX_INFLATED_BYTES) stop('compressed request body');
    });
    dest.on?.('data', (c: Buffer) => {
      inflated += c.length;
      if (inflated > MAX_INFLATED_BYTES) stop('inflated request body');
    });
    return pipe(dest, opts);
  }) as typeof req.pipe;
  return undefined;
}
