import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { ADMIN_DATABASE_URL } from './services.js';

/**
 * The plane's roles exactly as infra/grants.sql makes them, in one test database: one login per function
 * holding only its role (names unique to the run: roles are cluster-wide), the reaper's also granted
 * pg_read_all_stats as docs/operations.md tells operators to, and a login with no grants at all. For suites
 * that must run the plane's code as the roles a deployment gives it (issue 30).
 */
export type PlaneRole = 'executor_death' | 'reaper' | 'drain' | 'nobody';

export interface PlaneRoles {
  url(role: PlaneRole): string;
  drop(): Promise<void>;
}

const repoRoot = resolve(import.meta.dirname, '..', '..');

async function admin(fn: (c: pg.Client) => Promise<void>): Promise<void> {
  const c = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await c.connect();
  try {
    await fn(c);
  } finally {
    await c.end();
  }
}

/** Renders and runs infra/grants.sql in the database at `databaseUrl` (as its owner), after afterlife's migrations. */
export async function planeRoles(databaseUrl: string, owner: pg.Pool): Promise<PlaneRoles> {
  const tag = `afr_${randomBytes(4).toString('hex')}`;
  const roles = ['executor_death', 'reaper', 'drain'] as const;
  const users: Record<PlaneRole, string> = {
    executor_death: `${tag}-executor-death@proj.iam`,
    reaper: `${tag}-reaper@proj.iam`,
    drain: `${tag}-drain@proj.iam`,
    nobody: `${tag}-nobody`,
  };
  const vars: Record<string, string> = { dbos_schema: 'dbos', afterlife_schema: 'afterlife' };
  for (const r of roles) {
    vars[`${r}_role`] = `${tag}_${r}`;
    vars[`${r}_user`] = users[r];
  }
  const template = await readFile(join(repoRoot, 'infra', 'grants.sql'), 'utf8');
  await admin(async (c) => {
    for (const u of Object.values(users)) await c.query(`CREATE ROLE "${u}" LOGIN`);
    await c.query(`GRANT pg_read_all_stats TO "${users.reaper}"`);
  });
  await owner.query(template.replace(/\$\{([a-z_]+)\}/g, (_, k: string) => vars[k] ?? `<${k}>`));
  return {
    url: (role) => {
      const u = new URL(databaseUrl);
      u.username = encodeURIComponent(users[role]);
      u.password = '';
      return u.toString();
    },
    drop: async () => {
      // Privileges in the test database would keep the roles from dropping while it still exists.
      const all = [...Object.values(users), ...roles.map((x) => `${tag}_${x}`)].map((r) => `"${r}"`).join(', ');
      await owner.query(`DROP OWNED BY ${all}`).catch(() => undefined);
      await admin(async (c) => {
        for (const r of [...Object.values(users), ...roles.map((x) => `${tag}_${x}`)]) {
          // Owned objects and grants in the test database go with it; the role itself is cluster-wide.
          await c.query(`DROP ROLE IF EXISTS "${r}"`).catch(() => undefined);
        }
      });
    },
  };
}
