import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * SQL lives in the SQL layer: `db/` (afterlife's own tables, one operation per module under `queries/`) and
 * `dbos/` (statements on DBOS's tables), in shared/ for the plane and in the kit's package
 * (packages/executor/src) for what the kit runs — the package imports nothing outside itself — plus the
 * contract's liveness key (`contract/livenessKey.ts`), whose statements kit and plane must build alike.
 * Deciding code elsewhere calls a query function and keeps only the decision (docs/development.md,
 * "Layers"). This scan of shared/, packages/executor/src, functions/ and cli/ fails listing every line outside
 * those modules that holds statement text, bar the exceptions allowed below.
 */
const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SCANNED = ['shared', 'packages/executor/src', 'functions', 'cli'];
const SQL_LAYER = /^(shared|packages\/executor\/src)\/(db|dbos)\/|^packages\/executor\/src\/contract\/livenessKey\.ts$/;
/** Statement text (uppercase keywords, as the code writes SQL), session settings, LISTEN/NOTIFY, advisory locks, DDL. */
const STATEMENT =
  /\b(SELECT|UPDATE|DELETE FROM|INSERT INTO) |\bSET (LOCAL )?[a-z_]+ (=|TO) |\b(LISTEN|NOTIFY) [$"a-z]|pg_(try_)?advisory|\b(CREATE|DROP) (TABLE|INDEX|SCHEMA)\b/;

/**
 * The exceptions, each with why. A line is allowed only when it contains one of its file's snippets, so a new
 * statement in an allowed file still fails; a snippet that no longer matches fails too (the list stays true).
 */
const ALLOWED: Record<string, { why: string; snippets: string[] }> = {
  'packages/executor/src/runtime/liveness.ts': {
    why:
      "the liveness protocol itself: the lease is the session settings of the kit's dedicated connection " +
      '(keepalives, idle_session_timeout), and the fence hint, the drain hint and the request to claim recovered work now are its ' +
      'LISTENs; they configure that one session, not a table',
    snippets: [
      "'SET tcp_keepalives_idle = 5;",
      'LISTEN ${pg.escapeIdentifier(this.channel)}',
      'LISTEN ${pg.escapeIdentifier(this.requeued)}',
      'LISTEN ${pg.escapeIdentifier(this.drain)}',
      'SET idle_session_timeout = ${',
    ],
  },
};

interface Hit {
  file: string;
  line: number;
  text: string;
}

function sourceFiles(root: string, dir: string): string[] {
  let entries;
  try {
    entries = readdirSync(join(root, dir), { withFileTypes: true });
  } catch {
    return [];
  }
  return entries
    .sort((x, y) => x.name.localeCompare(y.name))
    .flatMap((e) => {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) return e.name === 'node_modules' ? [] : sourceFiles(root, path);
      return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
    });
}

/** Lines of statement text outside the SQL layer; whole-line comments are prose, not statements. */
function statementLines(root: string): Hit[] {
  return SCANNED.flatMap((d) => sourceFiles(root, d))
    .filter((f) => !SQL_LAYER.test(f))
    .flatMap((file) =>
      readFileSync(join(root, file), 'utf8')
        .split('\n')
        .map((text, i) => ({ file, line: i + 1, text: text.trim() }))
        .filter((h) => !/^(\/\/|\/\*|\*)/.test(h.text) && STATEMENT.test(h.text)),
    );
}

function check(root: string): { offenders: string[]; stale: string[] } {
  const hits = statementLines(root);
  const allowed = (h: Hit) => ALLOWED[h.file]?.snippets.some((s) => h.text.includes(s)) === true;
  const offenders = hits.filter((h) => !allowed(h)).map((h) => `${h.file}:${h.line}: ${h.text}`);
  const stale = Object.entries(ALLOWED).flatMap(([file, { snippets }]) =>
    snippets.filter((s) => !hits.some((h) => h.file === file && h.text.includes(s))).map((s) => `${file}: ${s}`),
  );
  return { offenders, stale };
}

const roots: string[] = [];
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'afterlife-sqllayer-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}
afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

describe('SQL lives in the db and dbos layers (shared/, the kit package)', () => {
  it('no statement text outside the SQL layer but the allowed exceptions, and every exception still applies', () => {
    const { offenders, stale } = check(repo);
    expect(offenders, `statements outside the SQL layer (move them there):\n${offenders.join('\n')}`).toEqual([]);
    expect(stale, 'allow-list snippets that match nothing (remove them)').toEqual([]);
  });

  it('fails listing statements planted beside decisions and a new one in an allowed file; comments and the SQL layer pass', () => {
    const liveness = readFileSync(join(repo, 'packages/executor/src/runtime/liveness.ts'), 'utf8');
    const root = tree({
      'packages/executor/src/runtime/liveness.ts': `${liveness}\nconst extra = 'SELECT 1 FROM pg_locks';\n`,
      'shared/retention/timeout.ts': 'const q = `UPDATE ${s}.workflow_status ws\n  SET status = 1`;\n// SELECT in a comment is prose\n',
      'cli/commands/migrate.ts': "const q = 'SELECT name FROM migrations ORDER BY id';\n",
      'functions/reaper/lease.ts': "await c.query('SELECT pg_try_advisory_lock(1)');\n",
      'shared/db/queries/fine.ts': "const q = 'DELETE FROM x';\n",
      'shared/dbos/fine.ts': "const q = 'INSERT INTO y VALUES (1)';\n",
      'packages/executor/src/db/queries/fine.ts': "const q = 'UPDATE z SET a = 1';\n",
      'packages/executor/src/contract/heartbeat.ts': "const q = 'SELECT 1 FROM pg_locks';\n",
    });
    const { offenders } = check(root);
    expect(offenders.map((o) => o.replace(/: .*/, '')).sort()).toEqual(
      [
        `packages/executor/src/runtime/liveness.ts:${liveness.split('\n').length + 1}`,
        'packages/executor/src/contract/heartbeat.ts:1',
        'shared/retention/timeout.ts:1',
        'shared/retention/timeout.ts:2',
        'cli/commands/migrate.ts:1',
        'functions/reaper/lease.ts:1',
      ].sort(),
    );
  });
});
