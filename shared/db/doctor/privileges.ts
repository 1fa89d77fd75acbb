import type { Db } from '../../../packages/executor/src/plane/index.js';

/**
 * What one role lacks, as the server's privilege functions answer (has_*_privilege follow role membership
 * and inheritance exactly as a session of that role would). `schemaTables`: privileges wanted on every table
 * of a schema — including tables created after the grants ran; `listed`: (table, privilege) pairs.
 */
export interface MissingPrivilege {
  object: string;
  privilege: string;
}

export async function existingRoles(db: Db, names: string[]): Promise<string[]> {
  const res = await db.query<{ rolname: string }>(
    `SELECT rolname::text FROM pg_roles WHERE rolname = ANY($1::text[]) ORDER BY 1`,
    [names],
    'doctor.existingRoles',
  );
  return res.rows.map((r) => r.rolname);
}

export async function missingPrivileges(
  db: Db,
  role: string,
  want: { schema: string; schemaTables: string[]; sequences: boolean; listed: Array<[table: string, privilege: string]> },
): Promise<MissingPrivilege[]> {
  const res = await db.query<{ object: string; privilege: string }>(
    `SELECT $2::text AS object, 'USAGE' AS privilege WHERE NOT has_schema_privilege($1, $2, 'USAGE')
     UNION ALL
     SELECT format('%I.%I', n.nspname, c.relname), p.priv
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace CROSS JOIN unnest($3::text[]) AS p(priv)
      WHERE n.nspname = $2 AND c.relkind IN ('r', 'p') AND NOT has_table_privilege($1, c.oid, p.priv)
     UNION ALL
     SELECT format('%I.%I', n.nspname, c.relname), 'USAGE'
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE $4::boolean AND n.nspname = $2 AND c.relkind = 'S'
        AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege($1, c.oid, 'USAGE') ELSE false END
     UNION ALL
     SELECT format('%I.%I', $2::text, w.tbl), w.priv FROM unnest($5::text[], $6::text[]) AS w(tbl, priv)
      WHERE to_regclass(format('%I.%I', $2::text, w.tbl)) IS NOT NULL
        AND NOT CASE WHEN w.priv IN ('SELECT', 'INSERT', 'UPDATE')
                     THEN has_any_column_privilege($1, to_regclass(format('%I.%I', $2::text, w.tbl)), w.priv)
                     ELSE has_table_privilege($1, to_regclass(format('%I.%I', $2::text, w.tbl)), w.priv) END
     ORDER BY 1, 2`,
    [role, want.schema, want.schemaTables, want.sequences, want.listed.map((l) => l[0]), want.listed.map((l) => l[1])],
    'doctor.missingPrivileges',
  );
  return res.rows;
}

export async function currentRole(db: Db): Promise<string> {
  const res = await db.query<{ role: string }>(`SELECT current_user::text AS role`, [], 'doctor.currentRole');
  return res.rows[0]?.role ?? '';
}
