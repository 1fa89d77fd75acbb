import { createHash } from 'node:crypto';
import { object, optional, string } from '../contract/parse.js';
import { AfterlifeError, errorMessage } from '../errors.js';

/**
 * A unique, stable executor ID on Cloud Run, so nobody writes one by hand: `<K_REVISION>-<12 hex>`, the
 * hex a hash of the instance ID the metadata server reports. Stable for the life of an instance
 * (a restart of the container on the same instance keeps it, and DBOS recovers its own work at launch);
 * unique across instances and revisions.
 *
 * At most 48 characters: DBOS names its sessions `dbos_transact_<executorID>_<version>` and Postgres
 * keeps 63 bytes of an application_name, so the reaper's session evidence can only tell executors apart
 * by what fits. The hash sits inside those 48, the revision is cut to make room.
 */
export const EXECUTOR_ID_MAX = 48;
const HASH_HEX = 12;

/** Retryable: the metadata server may answer on the next start; the instance must not start without an ID. */
export class ExecutorIdMetadataError extends AfterlifeError {
  constructor(message: string) {
    super(message, 'executor_id_metadata', 'retry');
  }
}

export interface CloudRunExecutorIdOptions {
  env?: NodeJS.ProcessEnv;
  /** host[:port] of the metadata server; default GCE_METADATA_HOST, else metadata.google.internal. */
  metadataHost?: string;
  /** Per attempt. */
  timeoutMs?: number;
  attempts?: number;
}

// Cloud Run sets K_REVISION (and K_SERVICE) in every container: https://cloud.google.com/run/docs/container-contract
const CloudRunEnv = object({
  K_REVISION: optional(string({ pattern: /^[a-z0-9][a-z0-9-]{0,62}$/, patternMessage: 'must be a Cloud Run revision name' })),
  GCE_METADATA_HOST: optional(string({ pattern: /^[A-Za-z0-9.-]+(:\d{1,5})?$/, patternMessage: 'must be host[:port]' })),
});
const InstanceId = string({ pattern: /^[A-Za-z0-9_-]{1,512}$/, patternMessage: 'instance ID must be a non-empty token' });

/**
 * The executor ID for this Cloud Run instance, or undefined when not on Cloud Run (no K_REVISION), so a
 * caller can fall back to DBOS__VMID in development. On Cloud Run a metadata server that does not
 * answer is an error, never a default: a shared ID would make instances recover each other's work.
 */
export async function cloudRunExecutorId(opts: CloudRunExecutorIdOptions = {}): Promise<string | undefined> {
  const parsed = CloudRunEnv.safeParse(opts.env ?? process.env);
  if (!parsed.success)
    throw new ExecutorIdMetadataError(
      `cloudRunExecutorId: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  const revision = parsed.data.K_REVISION;
  if (revision === undefined) return undefined;
  const host = opts.metadataHost ?? parsed.data.GCE_METADATA_HOST ?? 'metadata.google.internal';
  const instanceId = await readInstanceId(host, opts.timeoutMs ?? 2_000, opts.attempts ?? 3);
  return executorIdFor(revision, instanceId);
}

/** The ID for a revision and an instance ID (exported for tests and for apps that read the ID elsewhere). */
export function executorIdFor(revision: string, instanceId: string): string {
  const hash = createHash('sha256').update(instanceId).digest('hex').slice(0, HASH_HEX);
  return `${revision.slice(0, EXECUTOR_ID_MAX - HASH_HEX - 1)}-${hash}`;
}

async function readInstanceId(host: string, timeoutMs: number, attempts: number): Promise<string> {
  const url = `http://${host}/computeMetadata/v1/instance/id`;
  let last = '';
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      const res = await fetch(url, { headers: { 'Metadata-Flavor': 'Google' }, signal: AbortSignal.timeout(timeoutMs) });
      const body = (await res.text()).trim();
      // The header proves it is the metadata server and not some proxy's error page.
      if (res.headers.get('metadata-flavor') !== 'Google') last = `${url} answered ${res.status} without Metadata-Flavor: Google`;
      else if (!res.ok) last = `${url} answered ${res.status}`;
      else {
        const id = InstanceId.safeParse(body);
        if (id.success) return id.data;
        last = `${url}: ${id.error.issues[0]?.message ?? 'invalid instance ID'}`;
        break; // a malformed answer will not improve
      }
    } catch (err) {
      last = `${url}: ${errorMessage(err)}`;
    }
    if (attempt < attempts) await new Promise((r) => setTimeout(r, 100 * 2 ** attempt));
  }
  throw new ExecutorIdMetadataError(`cannot derive a Cloud Run executor ID: ${last}`);
}
