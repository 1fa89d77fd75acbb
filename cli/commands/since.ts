import { UsageError } from './types.js';

/** `--since`: a span back from now (`90m`, `24h`, `7d`, `30s`) or an ISO date; 24 h when not given. */
export const DEFAULT_SINCE_MS = 24 * 3_600_000;
const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseSince(raw: string | undefined, now: number): Date {
  if (raw === undefined) return new Date(now - DEFAULT_SINCE_MS);
  const span = /^(\d{1,6})([smhd])$/.exec(raw);
  if (span) return new Date(now - Number(span[1]) * (UNIT_MS[span[2] ?? 's'] ?? 1_000));
  const at = /^\d{4}-\d{2}-\d{2}/.test(raw) ? Date.parse(raw) : NaN;
  if (Number.isFinite(at) && at <= now) return new Date(at);
  throw new UsageError(`--since must be a span like 90m, 24h or 7d, or a past ISO date (got "${raw}")`);
}
