import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type pg from 'pg';

/**
 * What bench/fleet reads about the machine and the servers (issue 31): CPU seconds of processes from
 * /proc, Postgres backends' memory (PSS, so shared_buffers is shared out rather than counted per backend),
 * Redis's command counter and memory, and what the reaper's role ran (pg_stat_statements).
 */
const CLK_TCK = 100;

/** utime + stime of a process, in seconds; undefined when it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at state, the 3rd field.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const s = (Number(f[11]) + Number(f[12])) / CLK_TCK;
    return Number.isFinite(s) ? s : undefined;
  } catch {
    return undefined;
  }
}

/** CPU seconds per pid: a later snapshot minus this one gives each process's share of the window. */
export function cpuSnapshot(pids: number[]): Map<number, number> {
  const m = new Map<number, number>();
  for (const pid of pids) {
    const s = cpuSeconds(pid);
    if (s !== undefined) m.set(pid, s);
  }
  return m;
}

/** The CPU seconds spent between two snapshots by the processes present in both. */
export function cpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, s] of after) {
    const b = before.get(pid);
    if (b !== undefined) total += s - b;
  }
  return total;
}

/** Pss and private (anonymous + dirty) kB of a process from smaps_rollup; zero when unreadable. */
function memoryKb(pid: number): { pss: number; priv: number } {
  try {
    const s = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? 0);
    return { pss: kb('Pss'), priv: kb('Private_Clean') + kb('Private_Dirty') };
  } catch {
    return { pss: 0, priv: 0 };
  }
}

export interface PgServerReading {
  connections: number;
  /** client backends only (what max_connections counts). */
  clientBackends: number;
  pids: number[];
  pssMb: number;
  privateMbPerBackend: number;
}

export async function readPgServer(admin: pg.ClientBase): Promise<PgServerReading> {
  const r = await admin.query<{ pid: number; backend_type: string }>(`SELECT pid, backend_type FROM pg_stat_activity`);
  const pids = r.rows.map((x) => x.pid);
  const client = r.rows.filter((x) => x.backend_type === 'client backend');
  let pss = 0;
  let priv = 0;
  for (const row of client) {
    const m = memoryKb(row.pid);
    pss += m.pss;
    priv += m.priv;
  }
  return {
    connections: r.rows.length,
    clientBackends: client.length,
    pids,
    pssMb: Math.round(pss / 102.4) / 10,
    privateMbPerBackend: client.length ? Math.round((priv / client.length / 1024) * 100) / 100 : 0,
  };
}

export interface RedisReading {
  commands: number;
  usedMemoryMb: number;
  rssMb: number;
  pid: number;
  clients: number;
}

export async function readRedis(redis: Redis): Promise<RedisReading> {
  const info = await redis.info();
  const num = (k: string) => Number(new RegExp(`^${k}:(\\d+)`, 'm').exec(info)?.[1] ?? NaN);
  return {
    commands: num('total_commands_processed'),
    usedMemoryMb: Math.round(num('used_memory') / 104857.6) / 10,
    rssMb: Math.round(num('used_memory_rss') / 104857.6) / 10,
    pid: num('process_id'),
    clients: num('connected_clients'),
  };
}

/** Redis commands by name since the last CONFIG RESETSTAT (calls), for the cost model's per-command split. */
export async function redisCommandCalls(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
  return out;
}

export interface StatementTotals {
  calls: number;
  rows: number;
  /** Shared buffers hit or read: pages the statements touched. */
  blocks: number;
  execMs: number;
  /** WAL the statements wrote (bytes): a read that locks or rewrites rows shows here. */
  walBytes: number;
}

/** One statement's share: its query text's start, and its totals. */
export interface StatementShare extends StatementTotals {
  query: string;
}

/** What one role's statements did since pg_stat_statements_reset() (the reaper runs as a role of its own). */
export async function statementsOf(admin: pg.ClientBase, role: string): Promise<StatementTotals> {
  const r = await admin.query<{ calls: string; rows: string; blocks: string; ms: number; wal: string }>(
    `SELECT coalesce(sum(calls), 0)::text AS calls, coalesce(sum(rows), 0)::text AS rows,
            coalesce(sum(shared_blks_hit + shared_blks_read), 0)::text AS blocks, coalesce(sum(total_exec_time), 0)::float8 AS ms,
            coalesce(sum(wal_bytes), 0)::text AS wal
       FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = $1`,
    [role],
  );
  const row = r.rows[0];
  return {
    calls: Number(row?.calls ?? 0),
    rows: Number(row?.rows ?? 0),
    blocks: Number(row?.blocks ?? 0),
    execMs: row?.ms ?? 0,
    walBytes: Number(row?.wal ?? 0),
  };
}

/** One role's statements, the longest-running first: which statement a tick grows with. */
export async function topStatementsOf(admin: pg.ClientBase, role: string, limit: number): Promise<StatementShare[]> {
  const r = await admin.query<{ query: string; calls: string; rows: string; blocks: string; ms: number; wal: string }>(
    `SELECT regexp_replace(left(query, 400), '[[:space:]]+', ' ', 'g') AS query, calls::text, rows::text,
            (shared_blks_hit + shared_blks_read)::text AS blocks, total_exec_time::float8 AS ms, wal_bytes::text AS wal
       FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = $1
      ORDER BY total_exec_time DESC LIMIT $2`,
    [role, limit],
  );
  return r.rows.map((x) => ({
    query: x.query,
    calls: Number(x.calls),
    rows: Number(x.rows),
    blocks: Number(x.blocks),
    execMs: x.ms,
    walBytes: Number(x.wal),
  }));
}

export function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] as number;
}
