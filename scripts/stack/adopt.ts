import pg from 'pg';
import { createDb } from '../../packages/executor/src/db/pool.js';
import type { Logger } from '../../packages/executor/src/log.js';
import { findUnguarded } from '../../shared/reaper/unguarded.js';

/**
 * `npm start` without DBOS_APPLICATION_NAME: the stack guards the application its first kit registers
 * under, whatever DBOS calls it, so a developer sets no name anywhere (issue 27). Until a kit registers it
 * guards the local default. Every POLL_MS it asks the registry for live kits of an application no plane
 * ticks for (the reaper's own unguarded query); the first such application is adopted — the stack restarts
 * its functions under that name on the same ports — and any later one is a WARNING naming the fix.
 *
 * One application per stack, by design, rather than a wildcard: every statement of the plane is scoped by
 * one application name (its lease, its observations, its Redis keys, DBOS's rows with a NULL name), and a
 * `*` threaded through them is one missed statement away from acting on another application's work.
 */
const POLL_MS = 500;

export interface Adopter {
  stop(): Promise<void>;
}

export function adoptFirstApplication(o: {
  databaseUrl: string;
  dbosSchema: string;
  afterlifeSchema: string;
  current: () => string;
  adopt: (applicationName: string, executorIds: string[]) => Promise<void>;
  logger: Logger;
}): Adopter {
  const pool = new pg.Pool({ connectionString: o.databaseUrl, max: 1, application_name: 'afterlife-stack' });
  pool.on('error', () => undefined);
  const db = createDb(pool, 1, { dbosSchema: o.dbosSchema, afterlifeSchema: o.afterlifeSchema, logger: o.logger });
  let adopted = false;
  let stopped = false;
  const warned = new Set<string>();
  const look = async () => {
    for (const app of await findUnguarded(db, o.current())) {
      if (!adopted) {
        adopted = true;
        await o.adopt(app.applicationName, app.executorIds);
      } else if (!warned.has(app.applicationName)) {
        warned.add(app.applicationName);
        o.logger.warn(
          `kits registered under application "${app.applicationName}" too (${app.executorIds.join(', ')}); this stack guards "${o.current()}", one application per stack: give both apps one DBOS name, or run another \`npm start\` with DBOS_APPLICATION_NAME=${app.applicationName} and DATABASE_URL set to this database`,
          { event: 'unguarded_application', application: app.applicationName, guarded: o.current() },
        );
      }
    }
  };
  const loop = (async () => {
    while (!stopped) {
      await look().catch((err: unknown) => {
        if (!stopped) o.logger.debug('looking for kits to guard failed; retrying', { err });
      });
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      await pool.end();
    },
  };
}
