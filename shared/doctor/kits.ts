import { guardedApplications } from '../db/doctor/planes.js';
import { registeredApplications } from '../db/doctor/registeredApplications.js';
import { staleTickMs } from './plane.js';
import { fail, pass, warn, type Check } from './types.js';

/**
 * Kits registered and watched: every application kits registered under in this database must be one a
 * ticking plane guards. A kit under a name no plane guards (DBOS's configured name differs from the plane's
 * DBOS_APPLICATION_NAME) dies unrecovered and nothing else says why.
 */
export const kitsCheck: Check = {
  id: 'kits',
  title: 'kits registered and watched',
  async run({ db, config }) {
    const app = config.applicationName;
    const limit = staleTickMs();
    const guarded = (await guardedApplications(db))
      .filter((g) => g.sinceTickMs !== null && g.sinceTickMs <= limit)
      .map((g) => g.applicationName);
    const registered = await registeredApplications(db);
    const unguarded = registered.filter((r) => !guarded.includes(r.applicationName));
    const guardedText = guarded.length ? guarded.map((g) => `"${g}"`).join(', ') : 'none';
    const describe = (r: (typeof registered)[number]) =>
      `application "${r.applicationName}": ${r.registered} registered, ${r.live} holding their liveness lock (${r.examples.join(', ')})`;
    const liveUnguarded = unguarded.filter((r) => r.live > 0);
    if (liveUnguarded.length)
      return fail(
        `kits run under ${liveUnguarded.map((r) => `"${r.applicationName}"`).join(', ')}, which no plane in this database guards (guarded: ${guardedText}); their deaths go unrecovered`,
        `give the kits and the plane one application name: DBOS's configured name (DBOSConfig.name, DBOS_APPLICATION_NAME) must equal the plane's DBOS_APPLICATION_NAME ("${app}"), or deploy a plane for ${liveUnguarded.map((r) => `"${r.applicationName}"`).join(', ')}`,
        liveUnguarded.map(describe),
      );
    const mine = registered.find((r) => r.applicationName === app);
    if (!mine || mine.live === 0)
      return warn(
        `no live kit is registered under "${app}"${unguarded.length ? `; stale registrations under unguarded ${unguarded.map((r) => `"${r.applicationName}"`).join(', ')}` : ''}`,
        `attach the kit in every executor of "${app}" (docs/executor-kit.md); an executor without it is recovered only on the reaper's slower evidence`,
        unguarded.map(describe),
      );
    return pass(`${mine.live} live kit(s) under "${app}", guarded by a ticking plane`, [describe(mine), ...unguarded.map(describe)]);
  },
};
