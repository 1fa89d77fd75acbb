/** Plain-text tables and durations for terminal output. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** 950 ms → "950ms", 61_000 → "1m01s", 3_700_000 → "1h01m". */
export function duration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1_000) return `${Math.round(ms)}ms`;
  if (abs < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.floor(abs / 1000);
  if (abs < 3_600_000) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  if (abs < 86_400_000) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, '0')}h`;
}

export function ago(ms: number | null): string {
  if (ms === null) return '-';
  return ms < 0 ? `in ${duration(-ms)}` : `${duration(ms)} ago`;
}
