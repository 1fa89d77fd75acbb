import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * Single-flight leases in afterlife's `leases` table. Each call is one conditional statement on the
 * database clock: no transaction or connection is held while the holder works, and a holder that dies
 * simply stops renewing, so the lease expires and the next caller takes it.
 */
const table = (db: Db) => `${ident(db.afterlifeSchema)}.leases`;

/** Takes the lease if it is free, expired or already ours. True when we hold it until now + ttlMs. */
export async function tryAcquireLease(db: Db, name: string, holder: string, ttlMs: number): Promise<boolean> {
  const res = await db.query(
    `INSERT INTO ${table(db)} AS l (name, holder, expires_at, acquired_at)
     VALUES ($1, $2, now() + make_interval(secs => $3::double precision / 1000), now())
     ON CONFLICT (name) DO UPDATE
        SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
            acquired_at = CASE WHEN l.holder = EXCLUDED.holder THEN l.acquired_at ELSE now() END
      WHERE l.expires_at < now() OR l.holder IS NULL OR l.holder = EXCLUDED.holder
     RETURNING l.holder`,
    [name, holder, ttlMs],
    'leases.acquire',
  );
  return (res.rowCount ?? 0) > 0;
}

/**
 * Extends a lease we still hold, and records that a tick completed (`ticked`). False means it expired and
 * someone else may hold it now. A lapsed lease nobody took is still ours to renew: the holder name is the
 * instance's, so an instance back from a database blip carries on instead of waiting out its own lease.
 */
export async function renewLease(db: Db, name: string, holder: string, ttlMs: number, ticked = false): Promise<boolean> {
  const res = await db.query(
    `UPDATE ${table(db)} SET expires_at = now() + make_interval(secs => $3::double precision / 1000),
            last_tick_at = CASE WHEN $4::boolean THEN now() ELSE last_tick_at END
      WHERE name = $1 AND holder = $2`,
    [name, holder, ttlMs, ticked],
    'leases.renew',
  );
  return (res.rowCount ?? 0) > 0;
}

/** Milliseconds since any holder of the lease last completed a tick (database clock); undefined if never. */
export async function sinceLastTick(db: Db, name: string): Promise<number | undefined> {
  const res = await db.query<{ ms: string | null }>(
    `SELECT (EXTRACT(EPOCH FROM now() - last_tick_at) * 1000)::bigint::text AS ms FROM ${table(db)} WHERE name = $1`,
    [name],
    'leases.sinceLastTick',
  );
  const ms = res.rows[0]?.ms;
  return ms === null || ms === undefined ? undefined : Number(ms);
}

/** Gives the lease back so the next invocation need not wait for it to expire. */
export async function releaseLease(db: Db, name: string, holder: string): Promise<void> {
  await db.query(
    `UPDATE ${table(db)} SET holder = NULL, expires_at = '-infinity' WHERE name = $1 AND holder = $2`,
    [name, holder],
    'leases.release',
  );
}

export async function readLease(db: Db, name: string): Promise<{ holder: string | null; expiresAt: Date } | undefined> {
  const res = await db.query<{ holder: string | null; expires_at: Date }>(
    `SELECT holder, expires_at FROM ${table(db)} WHERE name = $1`,
    [name],
    'leases.read',
  );
  const r = res.rows[0];
  return r ? { holder: r.holder, expiresAt: r.expires_at } : undefined;
}
