import { GUARD_TICK_WITHIN_MS } from '../../packages/executor/src/plane/index.js';
import { guardedApplications } from '../db/doctor/planes.js';
import { fail, pass, type Check } from './types.js';

/**
 * A plane guards the application when its reaper ticks: the lease row `reaper:<app>` records the last tick
 * any reaper completed. "Recently" is the contract's window (GUARD_TICK_WITHIN_MS, contract/guard.ts), the
 * one the kit's `kit.watched` and the reaper's `unguarded_application` use, so doctor never calls a plane
 * ticking that the kits already call gone (it used max(2 min, 2 × FUNCTION_TIMEOUT_S): 5 min at
 * Terraform's 150 s, while the kits warned after 2).
 */
export function staleTickMs(): number {
  return GUARD_TICK_WITHIN_MS;
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
    const limit = staleTickMs();
    if (mine.sinceTickMs > limit)
      return fail(
        `the last reaper tick for "${app}" was ${Math.round(mine.sinceTickMs / 1000)} s ago (more than ${limit / 1000} s): no plane is running`,
        "check the Cloud Scheduler job afterlife-reaper and the reaper function's logs (npm start locally)",
      );
    return pass(`the reaper last ticked for "${app}" ${Math.round(mine.sinceTickMs / 1000)} s ago`);
  },
};
