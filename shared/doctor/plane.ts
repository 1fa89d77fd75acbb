import { guardedApplications } from '../db/doctor/planes.js';
import { fail, pass, type Check } from './types.js';

/**
 * A plane guards the application when its reaper ticks: the lease row `reaper:<app>` records the last tick
 * any reaper completed. Cloud Scheduler starts an invocation every minute and each ticks until its timeout,
 * so a last tick older than two invocations (at least two minutes) means no plane is running for it.
 */
export function staleTickMs(functionTimeoutS: number): number {
  return Math.max(120_000, 2 * functionTimeoutS * 1000);
}

export const planeCheck: Check = {
  id: 'plane',
  title: 'a plane ticks for the application',
  async run({ db, config }) {
    const app = config.applicationName;
    const all = await guardedApplications(db);
    const mine = all.find((g) => g.applicationName === app);
    const others = all.filter((g) => g.applicationName !== app).map((g) => g.applicationName);
    const elsewhere = others.length ? ` (planes in this database guard: ${others.join(', ')})` : '';
    if (!mine || mine.sinceTickMs === null)
      return fail(
        `no reaper has ever ticked for application "${app}"${elsewhere}`,
        `deploy the plane with DBOS_APPLICATION_NAME=${app} (Terraform: dbos_application_name), or point doctor at the application your kits use (--app)`,
      );
    const limit = staleTickMs(config.functionTimeoutS);
    if (mine.sinceTickMs > limit)
      return fail(
        `the last reaper tick for "${app}" was ${Math.round(mine.sinceTickMs / 1000)} s ago (more than ${limit / 1000} s): no plane is running`,
        "check the Cloud Scheduler job afterlife-reaper and the reaper function's logs (npm start locally)",
      );
    return pass(`the reaper last ticked for "${app}" ${Math.round(mine.sinceTickMs / 1000)} s ago`);
  },
};
