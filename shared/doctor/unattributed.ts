import { canSeeOtherSessions, unattributedSessions } from '../dbos/reaper.js';
import { UNATTRIBUTED_FIX } from '../reaper/unattributed.js';
import { pass, warn, type Check } from './types.js';

/**
 * Executors the plane cannot judge: sessions in this database that name no executor (DBOS for Python's own
 * `dbos_transact`, an empty name) leave "no session of executor X" without meaning, so while one is open the
 * reaper declares no executor without the kit dead (docs/reaper.md#executors-without-the-kit). WARN, not FAIL:
 * nothing is recovered wrongly, but deaths of such executors wait for someone — the fix names who.
 */
export const unattributedCheck: Check = {
  id: 'unattributed',
  title: 'every DBOS session names its executor',
  async run({ db }) {
    if (!(await canSeeOtherSessions(db)))
      return warn(
        "this role cannot see other roles' sessions: executors without the kit are not judged",
        'grant pg_read_all_stats to the role doctor and the reaper connect as',
      );
    const found = await unattributedSessions(db);
    if (found.length === 0) return pass('no session in this database hides which executor it belongs to');
    const total = found.reduce((n, s) => n + s.sessions, 0);
    return warn(
      `${total} session(s) name no executor: executors without the kit cannot be judged, and their deaths are not recovered`,
      UNATTRIBUTED_FIX,
      found.map(
        (s) =>
          `${s.sessions} session(s) named ${s.name === '' ? '(empty)' : JSON.stringify(s.name)} from ${s.clients.join(', ')} as ${s.users.join(', ')}${
            s.name === 'dbos_transact' ? ' — DBOS for Python (2.3 or later) names every session so' : ''
          }`,
      ),
    );
  },
};
