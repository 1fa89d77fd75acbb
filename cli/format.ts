/**
 * Plain-text tables and durations for terminal output.
 * @module
 */

// C0 and C1 controls, DEL, line/paragraph separators and bidi overrides/isolates: what a terminal acts on
// instead of printing. IDs come from anyone who can write an executor_id or publish a notice.

const UNSAFE_IN_LINE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const UNSAFE_IN_TEXT = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escape(c: string): string {
  const code = c.charCodeAt(0);
  return NAMED[c] ?? (code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`);
}

/** One value on one line: every control character escaped (`\n`, `\x1b`, `\u202e`), so it can neither move the cursor nor start a line. */
export function inline(value: string): string {
  return value.replace(UNSAFE_IN_LINE, escape);
}

/** A whole human output: the same, except its own line breaks. The last guard before a terminal. */
export function printable(text: string): string {
  return text.replace(UNSAFE_IN_TEXT, escape);
}

/**
 * `value` as one word for a POSIX shell, single-quoted (a quote inside is closed, escaped and reopened), so a
 * printed command copied into a terminal runs what it says: `status --app 'shop$(id)'` names an application,
 * it does not run `id`. Every command printed for a person quotes its arguments with this.
 */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

export function table(headers: string[], rows: string[][]): string {
  rows = rows.map((r) => r.map(inline));
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
