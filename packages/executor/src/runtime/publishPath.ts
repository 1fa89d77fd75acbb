import { ConfigError, errorMessage } from '../errors.js';
import { PUBSUB_REST_ENDPOINT, type Publisher, RestPublisher } from '../events/publish.js';
import type { Logger } from '../log.js';
import { matching, readVariables, shared } from './envReader.js';

/**
 * How the kit sends its death notice, lightest first, so an app does not carry `@google-cloud/pubsub`
 * (~134 packages) for one message at shutdown:
 *
 *   PUBSUB_BRIDGE_URL     the local stack's bridge (REST shape, no auth)
 *   PUBSUB_EMULATOR_HOST  the emulator's REST endpoint (no auth; it serves REST and gRPC on one port)
 *   @google-cloud/pubsub  if the app has it installed (an optional peer): its credentials, anywhere
 *   metadata server       Cloud Run / GCE / GKE: REST publish with the service account's token
 *
 * The project comes from the options, GOOGLE_CLOUD_PROJECT, or the metadata server.
 */
export interface PublishPathOptions {
  project?: string;
  env?: Record<string, string | undefined>;
  /** REST endpoint (a regional `https://<region>-pubsub.googleapis.com` or a private one); default the global one. */
  endpoint?: string;
  /** Use `@google-cloud/pubsub` when it can be imported (default true). */
  useClientLibrary?: boolean;
  timeoutMs?: number;
  logger?: Logger;
}

const ENV = {
  PUBSUB_BRIDGE_URL: matching(/^https?:\/\/[^\s]+$/, 'must be an http(s):// URL'),
  PUBSUB_EMULATOR_HOST: matching(/^[A-Za-z0-9.[\]:-]+:\d{1,5}$/, 'must be host:port'),
  GOOGLE_CLOUD_PROJECT: shared('GOOGLE_CLOUD_PROJECT'),
  GCLOUD_PROJECT: shared('GOOGLE_CLOUD_PROJECT'),
  GCE_METADATA_HOST: matching(/^[A-Za-z0-9.-]+(:\d{1,5})?$/, 'must be host[:port]'),
};

export type PublishPath = 'bridge' | 'emulator' | 'client-library' | 'rest';

export async function createKitPublisher(o: PublishPathOptions = {}): Promise<{ publisher: Publisher; path: PublishPath }> {
  const source = o.env ?? process.env;
  const env = readVariables(source, ENV) as Partial<Record<keyof typeof ENV, string>>;
  const project = o.project ?? env.GOOGLE_CLOUD_PROJECT ?? env.GCLOUD_PROJECT;
  const timeoutMs = o.timeoutMs ?? 10_000;
  if (env.PUBSUB_BRIDGE_URL)
    return { publisher: new RestPublisher(env.PUBSUB_BRIDGE_URL, project ?? 'afterlife-local', undefined, timeoutMs), path: 'bridge' };
  if (env.PUBSUB_EMULATOR_HOST) {
    if (!project) throw new ConfigError(['GOOGLE_CLOUD_PROJECT: set it (the emulator needs a project ID) or AFTERLIFE_PUBLISH=none']);
    return { publisher: new RestPublisher(`http://${env.PUBSUB_EMULATOR_HOST}`, project, undefined, timeoutMs), path: 'emulator' };
  }
  if (o.useClientLibrary !== false) {
    const client = await clientLibrary(project);
    if (client) return { publisher: client, path: 'client-library' };
  }
  const metadata = new MetadataServer(env.GCE_METADATA_HOST ?? 'metadata.google.internal');
  const projectId =
    project ??
    (await metadata.projectId().catch((err: unknown) => {
      throw new ConfigError([
        `death notices: no project ID and no metadata server (${errorMessage(err)}). ` +
          'Set GOOGLE_CLOUD_PROJECT (and run on Google Cloud, or install @google-cloud/pubsub for other credentials), ' +
          'PUBSUB_EMULATOR_HOST locally, or AFTERLIFE_PUBLISH=none',
      ]);
    }));
  // Warmed now so the notice at shutdown does not wait on it; a failure here is retried at publish time.
  await metadata
    .token()
    .catch((err: unknown) => o.logger?.warn('no access token from the metadata server yet; retried when a death notice is sent', { err }));
  return { publisher: new RestPublisher(o.endpoint ?? PUBSUB_REST_ENDPOINT, projectId, () => metadata.token(), timeoutMs), path: 'rest' };
}

interface PubSubModule {
  PubSub: new (o: { projectId?: string }) => unknown;
}

async function clientLibrary(project: string | undefined): Promise<Publisher | undefined> {
  // A variable, so neither TypeScript nor a bundler treats the optional peer as a dependency.
  const name = '@google-cloud/pubsub';
  let mod: PubSubModule;
  try {
    mod = (await import(name)) as PubSubModule;
  } catch {
    return undefined;
  }
  const { PubSubPublisher } = await import('../events/publisher.js');
  return new PubSubPublisher(new mod.PubSub(project ? { projectId: project } : {}) as ConstructorParameters<typeof PubSubPublisher>[0]);
}

/** The metadata server's token answer; anything else is an error, never a token. */
function parseToken(raw: string): { access_token: string; expires_in: number } {
  const t = JSON.parse(raw) as { access_token?: unknown; expires_in?: unknown } | null;
  if (typeof t?.access_token !== 'string' || t.access_token === '' || !Number.isSafeInteger(t.expires_in) || (t.expires_in as number) <= 0)
    throw new Error('metadata server returned an unreadable token');
  return { access_token: t.access_token, expires_in: t.expires_in as number };
}

/** The metadata server's project ID and access tokens (cached until 5 minutes before they expire). */
export class MetadataServer {
  private cached: { token: string; expiresAt: number } | undefined;
  private pending: Promise<string> | undefined;

  constructor(
    private readonly host: string,
    private readonly timeoutMs = 2_000,
  ) {}

  async projectId(): Promise<string> {
    const id = (await this.get('project/project-id')).trim();
    if (!/^[a-z0-9.:-]{1,100}$/.test(id)) throw new Error('metadata server returned an invalid project ID');
    return id;
  }

  token(): Promise<string> {
    if (this.cached && this.cached.expiresAt - Date.now() > 300_000) return Promise.resolve(this.cached.token);
    this.pending ??= this.get('instance/service-accounts/default/token')
      .then((raw) => {
        const t = parseToken(raw);
        this.cached = { token: t.access_token, expiresAt: Date.now() + t.expires_in * 1_000 };
        return t.access_token;
      })
      .finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async get(path: string): Promise<string> {
    const url = `http://${this.host}/computeMetadata/v1/${path}`;
    const res = await fetch(url, { headers: { 'Metadata-Flavor': 'Google' }, signal: AbortSignal.timeout(this.timeoutMs) });
    const body = await res.text();
    // The header proves it is the metadata server and not some proxy's error page.
    if (res.headers.get('metadata-flavor') !== 'Google') throw new Error(`${url} answered ${res.status} without Metadata-Flavor: Google`);
    if (!res.ok) throw new Error(`${url} answered ${res.status}`);
    return body;
  }
}
