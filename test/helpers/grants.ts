import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { ADMIN_DATABASE_URL } from './services.js';

/**
 * infra/grants.sql's roles for one test: NOLOGIN roles `<tag>_executor_death|reaper|drain` and a LOGIN user
 * for each, shaped like IAM database users (an @ and dots). Roles are cluster-wide: names are unique to the
 * run, and `drop` removes them (after the test database that holds their grants is dropped).
 */
export const FUNCTION_ROLES = ['executor_death', 'reaper', 'drain'] as const;
export type FunctionRoleName = (typeof FUNCTION_ROLES)[number];

export interface GrantRoles {
  prefix: string;
  roles: Record<FunctionRoleName, string>;
  users: Record<FunctionRoleName, string>;
  /** grants.sql rendered as Terraform renders it, for `dbos` and `afterlife`. */
  sql: string;
  /** `url` logged in as a user (no password: the test cluster trusts). */
  urlAs(url: string, user: string): string;
  drop(): Promise<void>;
}

export async function grantRoles(): Promise<GrantRoles> {
  const prefix = `afld_${randomBytes(4).toString('hex')}`;
  const roles = Object.fromEntries(FUNCTION_ROLES.map((r) => [r, `${prefix}_${r}`])) as Record<FunctionRoleName, string>;
  const users = Object.fromEntries(FUNCTION_ROLES.map((r) => [r, `${prefix}-${r.replace('_', '-')}@proj.iam`])) as Record<
    FunctionRoleName,
    string
  >;
  const vars: Record<string, string> = { dbos_schema: 'dbos', afterlife_schema: 'afterlife' };
  for (const r of FUNCTION_ROLES) {
    vars[`${r}_role`] = roles[r];
    vars[`${r}_user`] = users[r];
  }
  const template = readFileSync(new URL('../../infra/grants.sql', import.meta.url), 'utf8');
  const sql = template.replace(/\$\{([a-z_]+)\}/g, (_, k: string) => vars[k] ?? `<${k}>`);
  await admin(async (c) => {
    for (const u of Object.values(users)) await c.query(`CREATE ROLE "${u}" LOGIN`);
  });
  return {
    prefix,
    roles,
    users,
    sql,
    urlAs: (url, user) => {
      const u = new URL(url);
      u.username = encodeURIComponent(user);
      u.password = '';
      return u.toString();
    },
    drop: () =>
      admin(async (c) => {
        for (const r of [...Object.values(users), ...Object.values(roles)]) await c.query(`DROP ROLE IF EXISTS "${r}"`);
      }),
  };
}

export async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}
