import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../packages/executor/src/errors.js';
import { createKitPublisher } from '../../packages/executor/src/runtime/publishPath.js';

/** The kit example in docs/executor-kit.md is, byte for byte, the code the kit tests run. */
const read = (p: string) => readFileSync(new URL(`../../${p}`, import.meta.url), 'utf8');

describe('docs/executor-kit.md: Installing the executor kit in your DBOS app', () => {
  it('shows exactly the block of examples/agent-app/main.ts between its README markers', () => {
    const readme = read('docs/executor-kit.md');
    expect(readme).toContain('## Installing the executor kit in your DBOS app');
    const shown = /<!-- kit-example:begin -->\n```ts\n([\s\S]*?)```\n<!-- kit-example:end -->/.exec(readme)?.[1];
    const main = read('examples/agent-app/main.ts');
    const code =
      /\/\/ --- README: installing the executor kit \(begin\) ---\n([\s\S]*?)\/\/ --- README: installing the executor kit \(end\) ---/.exec(
        main,
      )?.[1];
    expect(code).toBeDefined();
    // The example imports the kit by the repository's name for it; the docs show the name an app installs.
    expect(code).toContain("from 'afterlife-plane/executor'");
    expect(shown).toBe(code?.trimEnd().replaceAll("from 'afterlife-plane/executor'", "from 'afterlife-executor'") + '\n');
    expect(shown).not.toContain('afterlife-plane');
    expect(code).toContain('await attachExecutor(');
    // Self-contained, so a reader can paste it: the env helper it calls is defined inside the block.
    expect(code).toContain("required('DBOS_SYSTEM_DATABASE_URL')");
    expect(code).toMatch(/^function required\(key: string\): string \{$/m);
  });

  it('off Google Cloud: the docs name every setting the refusal names, and say nothing else is required only on Cloud Run', async () => {
    // No project and no metadata server (a closed port): what a laptop or CI is.
    const err = await createKitPublisher({ env: { GCE_METADATA_HOST: '127.0.0.1:1' }, useClientLibrary: false }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    const refusal = (err as ConfigError).message;
    const doc = read('docs/executor-kit.md');
    const off = /## Off Google Cloud[^\n]*\n([\s\S]*?)\n## /.exec(doc)?.[1] ?? '';
    for (const setting of ['AFTERLIFE_PUBLISH=none', 'PUBSUB_EMULATOR_HOST', 'GOOGLE_CLOUD_PROJECT']) {
      expect(refusal).toContain(setting);
      expect(off).toContain(setting);
    }
    expect(off).toMatch(/exit 78/);
    for (const file of ['docs/executor-kit.md', 'README.md', 'packages/executor/README.md']) {
      for (const m of read(file).matchAll(/[^.]*nothing else is required[^.]*\./gi)) expect(m[0], file).toMatch(/on Cloud Run/i);
    }
  });
});
