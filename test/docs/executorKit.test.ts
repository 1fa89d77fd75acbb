import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

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
});
