import pg from 'pg';
import { takeLivenessSql } from '../../packages/executor/src/contract/livenessKey.js';
import { registerAlive } from '../../packages/executor/src/db/queries/executors.js';
import type { Db } from '../../packages/executor/src/db/pool.js';

/** Registers an incarnation of an executor alive (v1, with heartbeats and liveness), as a kit does. */
export function registerIncarnation(db: Db, applicationName: string, executorId: string, incarnation: string) {
  return registerAlive(db, {
    applicationName,
    executorId,
    applicationVersion: 'v1',
    startedAt: new Date(),
    heartbeats: true,
    liveness: true,
    incarnation,
  });
}

/**
 * An executor registered alive (v1, with heartbeats and liveness) whose liveness lock a session of the test
 * holds, taken with the kit's own statement: Postgres's word that the process lives. The caller ends
 * `session` to free the lock, and checks `took` (the statement's answer).
 */
export async function holdLiveness(
  db: Db,
  url: string,
  o: { applicationName: string; executorId: string; incarnation: string },
): Promise<{ session: pg.Client; took: { ok: boolean; recorded: boolean }[] }> {
  const session = new pg.Client({ connectionString: url });
  await session.connect();
  try {
    await registerIncarnation(db, o.applicationName, o.executorId, o.incarnation);
    const took = await session.query<{ ok: boolean; recorded: boolean }>(takeLivenessSql('afterlife'), [
      o.applicationName,
      o.executorId,
      o.incarnation,
    ]);
    return { session, took: took.rows };
  } catch (err) {
    await session.end();
    throw err;
  }
}
