import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { loadedDbos } from './dbosInternals.js';

/**
 * The version of the DBOS the app launched: its package.json, next to the entry point the kit found among
 * the loaded copies (dist/src/index.js → ../../package.json). Undefined when it cannot be read; the kit
 * records it at registration so the plane's doctor can check it against the supported range.
 */
export function launchedDbosVersion(): string | undefined {
  try {
    const launched = loadedDbos().find((c) => c.DBOS.isInitialized()) ?? loadedDbos()[0];
    if (!launched) return undefined;
    const pkg = JSON.parse(readFileSync(join(dirname(launched.entry), '..', '..', 'package.json'), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : undefined;
  } catch {
    return undefined;
  }
}
