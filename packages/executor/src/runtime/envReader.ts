import { ConfigError } from '../errors.js';
import { type Parsed, parseDurationMs, parseSetting, type SettingName } from '../contract/settings.js';

/**
 * Reading the kit's variables: each by a reader that returns the value or a message; every problem is reported
 * at once as a ConfigError (`NAME: message`), as the plane's config does. The contract's settings go through
 * the contract's parser (`shared`).
 */
export type Reader = (raw: string) => Parsed<string | number>;

export const matching =
  (re: RegExp, message: string): Reader =>
  (raw) =>
    re.test(raw) ? { ok: true, value: raw } : { ok: false, problem: message };
export const oneOf = (...values: string[]): Reader =>
  matching(new RegExp(`^(${values.join('|')})$`), `must be one of ${values.join(', ')}`);
export const postgresUrl = matching(/^postgres(ql)?:\/\//, 'must be a postgres:// URL');
export const durationMs =
  (min: number): Reader =>
  (raw) =>
    parseDurationMs(raw, min);
export const shared =
  (name: SettingName): Reader =>
  (raw) =>
    parseSetting(name, raw);

export function readVariables(env: Record<string, string | undefined>, readers: Record<string, Reader>): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  const problems: string[] = [];
  for (const [key, read] of Object.entries(readers)) {
    const raw = env[key];
    // An empty variable is how Terraform and shells spell "unset", as in the plane's config.
    if (raw === undefined || raw === '') continue;
    const r = read(raw);
    if (r.ok) out[key] = r.value;
    else problems.push(`${key}: ${r.problem}`);
  }
  if (problems.length) throw new ConfigError(problems);
  return out;
}
