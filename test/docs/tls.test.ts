import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Issue 23, observation 9: the security docs' TLS paragraph said Memorystore's transit encryption is
 * disabled while infra/redis.tf defaults to SERVER_AUTHENTICATION. The paragraph (wherever the docs keep
 * it) must say what Terraform does by default.
 */
const root = resolve(import.meta.dirname, '..', '..');
const docsDir = join(root, 'docs');
const docs = [
  'README.md',
  ...(existsSync(docsDir) ? readdirSync(docsDir, { withFileTypes: true }) : [])
    .filter((d) => d.isFile() && d.name.endsWith('.md'))
    .map((d) => join('docs', d.name)),
];

function tlsParagraphs(): string[] {
  return docs.flatMap((f) => readFileSync(join(root, f), 'utf8').split(/\n\s*\n/)).filter((p) => p.startsWith('**TLS.**'));
}

describe('the TLS paragraph matches infra/redis.tf', () => {
  it('Terraform defaults to SERVER_AUTHENTICATION, and the docs say so', () => {
    const vars = readFileSync(join(root, 'infra', 'variables.tf'), 'utf8');
    const redisTf = readFileSync(join(root, 'infra', 'redis.tf'), 'utf8');
    expect(vars).toMatch(/transit_encryption\s*=\s*optional\(bool,\s*true\)/);
    expect(redisTf).toMatch(/transit_encryption_mode = var\.redis\.transit_encryption \? "SERVER_AUTHENTICATION" : "DISABLED"/);
    const paragraphs = tlsParagraphs();
    expect(paragraphs.length).toBeGreaterThan(0);
    for (const p of paragraphs) {
      expect(p).toMatch(/SERVER_AUTHENTICATION/);
      expect(p).toMatch(/rediss:\/\//);
      expect(p).not.toMatch(/has\s+`transit_encryption_mode = "DISABLED"`/);
      expect(p).not.toMatch(/being added separately/);
    }
  });
});
