import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * Other applications in this database, for a CLI that found nothing under its own: one plane's name is not
 * the only one a database holds (the local stack guards several), and "nothing here" must say where there is
 * something. Reads afterlife's own tables only (small: one row per executor, per death).
 */

/** Applications other than `except` with executors in the registry, the most executors first (at most `limit`). */
export async function applicationsWithExecutors(
  db: Db,
  except: string,
  limit: number,
): Promise<Array<{ applicationName: string; executors: number }>> {
  const s = ident(db.afterlifeSchema);
  const res = await db.query<{ application_name: string; n: number }>(
    `SELECT application_name, count(*)::int AS n FROM ${s}.executors
      WHERE application_name <> $1 GROUP BY application_name ORDER BY n DESC, application_name LIMIT $2`,
    [except, limit],
    'executors.other_applications',
  );
  return res.rows.map((r) => ({ applicationName: r.application_name, executors: r.n }));
}

/**
 * Applications other than `except` that know `target` as an executor ID (a timeline, a registry row) or,
 * when it is all digits, as a recovery's number: where `afterlife-plane timeline <target>` would find it.
 */
export async function applicationsKnowing(db: Db, except: string, target: string, limit: number): Promise<string[]> {
  const s = ident(db.afterlifeSchema);
  const recoveryId = /^\d{1,18}$/.test(target) ? target : null;
  const res = await db.query<{ application_name: string }>(
    `SELECT application_name FROM (
       SELECT application_name FROM ${s}.timelines WHERE executor_id = $2
       UNION SELECT application_name FROM ${s}.executors WHERE executor_id = $2
       UNION SELECT application_name FROM ${s}.recoveries WHERE $3::text IS NOT NULL AND id = $3::text::bigint
     ) k WHERE application_name <> $1 ORDER BY application_name LIMIT $4`,
    [except, target, recoveryId, limit],
    'timelines.other_applications',
  );
  return res.rows.map((r) => r.application_name);
}
