/**
 * Quotes a schema name that config already validated as an identifier. Here, below the SQL that both the kit
 * and the plane build (the liveness key's statements, every query), so the contract needs nothing above it.
 */
export function ident(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) throw new Error(`not an identifier: ${name}`);
  return `"${name}"`;
}
