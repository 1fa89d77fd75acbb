import { DBOS } from '@dbos-inc/dbos-sdk';

/**
 * Creates or upgrades DBOS's system schema through DBOS itself (`DBOS.migrate`), for the local stack and
 * `afterlife-plane migrate --dbos`. Run it once before executors launch: DBOS has no advisory lock around its
 * migrations and concurrent launches on a fresh database fail. DBOS announces the migration with
 * console.log; that goes to stderr here, because stdout carries our own output (JSON with --json).
 */
export async function migrateDbosSchema(url: string, schemaName: string): Promise<void> {
  const log = console.log;
  console.log = (...args: unknown[]) => console.error(...args);
  try {
    await DBOS.migrate(url, { schemaName });
  } finally {
    console.log = log;
  }
}
