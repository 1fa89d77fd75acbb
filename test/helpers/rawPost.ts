import { request } from 'node:http';

/**
 * A raw HTTP POST for the trust tests (fetch would refuse to send a Content-Encoding it did not apply
 * itself): the body as given, with a Content-Length, or chunked in 64 KiB pieces without one.
 */
export function rawPost(
  url: string,
  body: Buffer,
  headers: Record<string, string>,
  chunked = false,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers, ...(chunked ? {} : { 'content-length': String(body.length) }) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    if (chunked) {
      for (let i = 0; i < body.length; i += 64 * 1024) req.write(body.subarray(i, i + 64 * 1024));
      req.end();
    } else req.end(body);
  });
}
