/**
 * REDIS_CA_CERT: the PEM certificates (one or more, as Memorystore's server_ca_certs during a rotation)
 * that sign the server's certificate; only with a rediss:// URL. Parsed with the other shared settings
 * (settings.ts); the Redis client factory re-checks the pairing with the URL.
 * @module
 */

export const PEM_CERTIFICATE_RE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/;

/** A CA without TLS is a misconfiguration, not something to ignore: the operator meant encryption. */
export function redisTlsProblem(url: string | undefined, ca: string | undefined): string | undefined {
  if (ca === undefined) return undefined;
  if (url === undefined) return 'REDIS_CA_CERT: is set but REDIS_URL is not';
  if (!url.startsWith('rediss://')) return 'REDIS_CA_CERT: is set but REDIS_URL is not a rediss:// (TLS) URL';
  return undefined;
}
