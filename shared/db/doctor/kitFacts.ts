import { type Db, type DbosSdk, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * What a live kit of the application recorded about itself (migration 0016), for this incarnation only. Every
 * live kit, never a sample: a check that says "each" must have read each (a row is ~100 bytes; 10,000 kits
 * are a megabyte once per doctor run). The checks bound what they print, not what they read.
 */
export interface RecordedKit {
  executorId: string;
  /** undefined: nothing recorded for this incarnation (a kit from before the column, or its write failed). */
  kitVersion: string | undefined;
  dbosVersion: string | undefined;
  /** The SDK the kit runs on: the Python kit records `python`; the TypeScript kit records none. */
  dbosSdk: DbosSdk;
  livenessLeaseMs: number | undefined;
  /** Whether recoveries can ask it to claim their work now; undefined from kits before the fact. */
  pollsOnRequest: boolean | undefined;
  /** Whether the kit holds a liveness lock (only then is there a lease to report). */
  liveness: boolean;
}

export async function recordedKits(db: Db, applicationName: string): Promise<RecordedKit[]> {
  const res = await db.query<{ executor_id: string; liveness: boolean; facts: Record<string, unknown> | null }>(
    `SELECT executor_id, liveness, CASE WHEN kit_facts->>'incarnation' = incarnation THEN kit_facts END AS facts
       FROM ${ident(db.afterlifeSchema)}.executors
      WHERE application_name = $1 AND state IN ('alive', 'draining')
      ORDER BY executor_id`,
    [applicationName],
    'doctor.recordedKits',
  );
  const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return res.rows.map((r) => ({
    executorId: r.executor_id,
    liveness: r.liveness,
    kitVersion: text(r.facts?.kitVersion),
    dbosVersion: text(r.facts?.dbosVersion),
    dbosSdk: r.facts?.dbosSdk === 'python' ? 'python' : 'typescript',
    livenessLeaseMs: typeof r.facts?.livenessLeaseMs === 'number' ? r.facts.livenessLeaseMs : undefined,
    pollsOnRequest: typeof r.facts?.pollsOnRequest === 'boolean' ? r.facts.pollsOnRequest : undefined,
  }));
}
