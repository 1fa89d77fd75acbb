import '../../functions/index.js';
import {
  decodeDeathEvent,
  deathLog,
  type DeathOutcome,
  type DeliveryMeta,
  handleDecodedDeath,
} from '../../functions/executorDeath/handle.js';
import { useRuntime } from '../../functions/runtime.js';
import type { Runtime } from '../../shared/runtime.js';
import { appFixture, type AppFixture, type AppFixtureOptions, need } from './appFixture.js';
import { serve } from './cloudEvents.js';

/**
 * The executorDeath and recovery suites' set-up: a test database and a Runtime for one app (appFixture),
 * and unless `serve: false` the executorDeath function served over HTTP on that runtime, as
 * functions-framework serves it. Registers its own beforeAll/afterAll; call it in a describe body.
 */
export interface ExecutorDeathFixture extends AppFixture {
  /** The served function (throws with `serve: false`). */
  readonly server: Awaited<ReturnType<typeof serve>>;
}

export interface ExecutorDeathFixtureOptions extends Omit<AppFixtureOptions, 'setup'> {
  /** Serve executorDeath on the fixture's runtime (default true). */
  serve?: boolean;
  /** Run in beforeAll once the function is served (start a bridge, seed rows). */
  setup?: (f: ExecutorDeathFixture) => Promise<void>;
}

/** Serves executorDeath on the fixture's runtime (the runtime the functions use), closed with the fixture. */
export async function serveExecutorDeath(f: AppFixture): Promise<Awaited<ReturnType<typeof serve>>> {
  useRuntime(f.rt);
  const s = await serve('executorDeath');
  f.onClose(() => s.close());
  return s;
}

export function executorDeathFixture(prefix: string, o: ExecutorDeathFixtureOptions = {}): ExecutorDeathFixture {
  const { serve: served = true, setup, ...rest } = o;
  let server: Awaited<ReturnType<typeof serve>> | undefined;
  const base = appFixture(prefix, {
    ...rest,
    setup: async (f) => {
      if (served) server = await serveExecutorDeath(f);
      await setup?.(f as ExecutorDeathFixture);
    },
  });
  return Object.defineProperty(base, 'server', { get: () => need(server, 'served executorDeath') }) as ExecutorDeathFixture;
}

/** One delivery's body decoded and handled, as the served function composes the two (no HTTP in between). */
export async function handleDeathEvent(rt: Runtime, body: unknown, meta: DeliveryMeta = {}): Promise<DeathOutcome> {
  const decoded = decodeDeathEvent(body, deathLog(rt, meta));
  return decoded.ok ? handleDecodedDeath(rt, decoded.message, meta) : decoded.outcome;
}
