import { appRoleSettings, type AppRoleSetting, boundIdleTransactionsSql } from '../db/doctor/appRoles.js';
import { fail, pass, warn, type Check } from './types.js';

/**
 * idle_in_transaction_session_timeout on the role the app's kits connect as, as a new session of that role
 * in this database gets it. 0 (never) lets a host lost inside a transaction keep its row locks for as long
 * as its session lives, and its workflows are not recovered until then (docs/lost-transactions.md). DBOS
 * 5.3 sets 60 s on the pools it builds, so the role's value matters when the app passes its own pool or
 * turns that off: a WARN, not a FAIL (the kit warns at attach when DBOS's own connections run with 0).
 */
export const idleTransactionsCheck: Check = {
  id: 'idle-transactions',
  title: "idle_in_transaction_session_timeout on the app's role",
  async run({ db, config }) {
    const roles = await appRoleSettings(db, config.applicationName, 'idle_in_transaction_session_timeout');
    if (!roles.length)
      return warn(
        `no session of a live kit of "${config.applicationName}" to read the app's role from`,
        'run doctor while the app runs with the kit attached',
      );
    const read = roles.map((r) => ({ r, ms: effectiveMs(r) }));
    const unknown = read.filter((x) => x.ms === undefined);
    const unbounded = read.filter((x) => x.ms === 0);
    const details = read.map(
      ({ r, ms }) => `role "${r.role}": ${ms === undefined ? 'unknown (the server value is hidden from this role)' : `${ms} ms`}`,
    );
    if (unbounded.length)
      return warn(
        `idle_in_transaction_session_timeout is 0 (never) for ${unbounded.map((x) => `"${x.r.role}"`).join(', ')} in "${unbounded[0]?.r.database ?? ''}"`,
        unbounded.map((x) => boundIdleTransactionsSql(x.r.role, x.r.database)).join('; '),
        details,
      );
    if (unknown.length)
      return warn(
        'the server-wide value is hidden from this role',
        'run doctor as the schema owner, or set the value on the role explicitly',
        details,
      );
    if (read.some((x) => (x.ms ?? 0) > 600_000))
      return fail(
        'a lost transaction keeps its locks for more than 10 minutes',
        `set it to about 60 s: ${read.map((x) => boundIdleTransactionsSql(x.r.role, x.r.database)).join('; ')}`,
        details,
      );
    return pass(`bounded for every role the app's kits use`, details);
  },
};

/** The first level that sets it (role in database, role, database, server), in milliseconds. */
function effectiveMs(r: AppRoleSetting): number | undefined {
  const raw = r.roleInDatabase ?? r.roleOnly ?? r.databaseOnly ?? r.server;
  return raw === null ? undefined : durationMs(raw);
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1_000, min: 60_000, h: 3_600_000, d: 86_400_000 };

/** A Postgres time setting as written in pg_db_role_setting or pg_settings ('60s', '1min', '60000', '0ms'). */
export function durationMs(raw: string): number | undefined {
  const m = /^\s*'?(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?'?\s*$/.exec(raw);
  if (!m) return undefined;
  return Math.round(Number(m[1]) * (UNIT_MS[m[2] ?? 'ms'] ?? 1));
}
