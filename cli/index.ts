#!/usr/bin/env node
/**
 * The operator CLI. Configured by the same environment as the functions (DATABASE_URL or the Cloud SQL
 * variables, DBOS_APPLICATION_NAME, REDIS_URL, …). Tables on a terminal; `--json` prints one JSON document
 * (schemas in cli/schemas.ts). Exit codes: 0 ok, 1 failure, 2 usage or configuration error.
 */
import { parseArgs } from 'node:util';
import { AfterlifeError, ConfigError, errorMessage } from '../packages/executor/src/plane/index.js';
import { type CliContext, createContext } from './context.js';
import { inline, printable } from './format.js';
import { migrate } from './commands/migrate.js';
import { recover } from './commands/recover.js';
import { status } from './commands/status.js';
import { followLogs } from './commands/logs.js';
import { watch } from './commands/watch.js';
import { type CommandResult, UsageError } from './commands/types.js';
import { drain } from './commands/drain.js';
import { fork } from './commands/fork.js';
import { reap } from './commands/reap.js';
import { retention } from './commands/retention.js';
import { doctor } from './commands/doctor.js';
import { parseSince } from './commands/since.js';
import { timeline } from './commands/timeline.js';
import type { ErrorOutput } from './schemas.js';

export const USAGE = `usage: afterlife-plane <command> [options]

commands:
  status [--watch] [--interval-s S] [--since SPAN]
                                        executors (state, version, heartbeat age, PENDING, oldest activity),
                                        stuck and diverged counts, deaths since SPAN (default 24h; or an ISO
                                        date) with p50/p95/max death → first step elsewhere and the slowest,
                                        recent recoveries; --watch refreshes the table in place every S
                                        seconds (default 2) until Ctrl-C
  timeline <executorId | recovery number>
                                        one death's recovery timeline: last sign of life, declared, notice,
                                        re-enqueued, first step elsewhere, all started, and the gaps
  logs [--executor E] [--workflow W]    afterlife's JSON log lines from stdin (npm start -- --json, a saved
                                        file) as one readable line each, only those about E and/or W;
                                        --json keeps them JSON (LOG_FORMAT=json too)
  recover <executorId> [--dry-run] [--force]
                                        re-enqueue a dead executor's PENDING workflows (refuses a live one
                                        unless --force)
  reap [--dry-run] [--ticks N]          the reaper, N ticks (default 2: death needs two): dead executors,
                                        stuck and diverged workflows; --dry-run only lists what it would do
  fork <workflowId> [--from-step N]     fork a workflow (default: from its first divergent step)
  drain --version V [--wait] [--timeout-s S]
                                        drain every executor of version V; --wait follows until drained
  retention [--dry-run] [--budget-s S]  one retention pass with the configured policy (RETENTION_MAX_COMPLETED,
                                        RETENTION_MAX_AGE_MS, WORKFLOW_GLOBAL_TIMEOUT_MS; off unless set);
                                        --dry-run lists what would be deleted or cancelled
  doctor [--role-prefix P]              check the deployment end to end (plane, kits, grants, liveness
                                        sessions, pooler, Redis, index, settings): PASS/WARN/FAIL each,
                                        with the fix and its doc section; exit 1 on any FAIL. P: the
                                        prefix of infra/grants.sql's roles (default afterlife)
  migrate [--dbos] [--indexes]          apply afterlife's migrations (--dbos: DBOS's system schema first;
                                        --indexes: build the opt-in indexes on DBOS's tables, CONCURRENTLY)

options (every command):
  --json          one JSON document on stdout (progress goes to stderr)
  --app NAME      DBOS application name (default: DBOS_APPLICATION_NAME)
  --verbose       afterlife's own logs on stderr
  -h, --help      this help

environment: DATABASE_URL (or INSTANCE_CONNECTION_NAME, DB_USER, DB_NAME), DBOS_APPLICATION_NAME,
REDIS_URL, and the rest of docs/configuration.md.
exit codes: 0 ok, 1 failure, 2 usage or configuration error.
`;

const COMMON = {
  json: { type: 'boolean', default: false },
  app: { type: 'string' },
  verbose: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

export const COMMANDS = {
  status: { watch: { type: 'boolean', default: false }, 'interval-s': { type: 'string' }, since: { type: 'string' } },
  timeline: {},
  logs: { executor: { type: 'string' }, workflow: { type: 'string' } },
  recover: { 'dry-run': { type: 'boolean', default: false }, force: { type: 'boolean', default: false } },
  reap: { 'dry-run': { type: 'boolean', default: false }, ticks: { type: 'string' } },
  fork: { 'from-step': { type: 'string' } },
  drain: { version: { type: 'string' }, wait: { type: 'boolean', default: false }, 'timeout-s': { type: 'string' } },
  migrate: { dbos: { type: 'boolean', default: false }, indexes: { type: 'boolean', default: false } },
  retention: { 'dry-run': { type: 'boolean', default: false }, 'budget-s': { type: 'string' } },
  doctor: { 'role-prefix': { type: 'string' } },
} as const;
type CommandName = keyof typeof COMMANDS;

export async function main(argv: string[], env: Record<string, string | undefined> = process.env): Promise<number> {
  const [name, ...rest] = argv;
  const wantsJson = rest.includes('--json');
  if (name === undefined || name === '-h' || name === '--help' || name === 'help') {
    // Asked for help: stdout, success. Called with nothing: a usage error on stderr.
    (name === undefined ? process.stderr : process.stdout).write(USAGE);
    return name === undefined ? 2 : 0;
  }
  if (!(name in COMMANDS)) return fail(wantsJson, new UsageError(`unknown command "${name}"`), 2);
  const command = name as CommandName;

  let parsed: ReturnType<typeof parseCommand>;
  try {
    parsed = parseCommand(command, rest);
  } catch (err) {
    return fail(wantsJson, new UsageError(errorMessage(err)), 2);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const json = values.json === true;
  if (command === 'logs') {
    if (positionals.length) return fail(json, new UsageError(`logs takes no positional arguments (got ${positionals.join(' ')})`), 2);
    try {
      return await followLogs(process.stdin, process.stdout, {
        json,
        env,
        filter: { executor: str(values.executor), workflow: str(values.workflow) },
      });
    } catch (err) {
      return fail(json, new UsageError(errorMessage(err)), 2);
    }
  }
  if (command === 'status' && values.watch === true) {
    const raw = values['interval-s'];
    if (raw !== undefined && (typeof raw !== 'string' || !/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 3600)) {
      return fail(json, new UsageError(`--interval-s must be an integer from 1 to 3600 (got "${String(raw)}")`), 2);
    }
    let ctx: CliContext | undefined;
    try {
      ctx = await createContext({
        env,
        ...(typeof values.app === 'string' ? { app: values.app } : {}),
        json,
        verbose: values.verbose === true,
      });
      const c = ctx;
      const since = str(values.since);
      return await watch(() => status(c, { since: parseSince(since, Date.now()) }), process.stdout, {
        json,
        intervalMs: (raw === undefined ? 2 : Number(raw)) * 1000,
      });
    } catch (err) {
      return fail(json, err, err instanceof UsageError || err instanceof ConfigError ? 2 : 1);
    } finally {
      await ctx?.close().catch(() => undefined);
    }
  }

  let ctx: CliContext | undefined;
  try {
    const run = dispatch(command, values, positionals);
    ctx = await createContext({
      env,
      ...(typeof values.app === 'string' ? { app: values.app } : {}),
      json,
      verbose: values.verbose === true,
    });
    const result = await run(ctx);
    process.stdout.write(json ? `${JSON.stringify(result.json)}\n` : printable(result.text));
    return result.exitCode;
  } catch (err) {
    const code = err instanceof UsageError || err instanceof ConfigError ? 2 : 1;
    return fail(json, err, code);
  } finally {
    await ctx?.close().catch(() => undefined);
  }
}

type Values = Record<string, string | boolean | undefined>;

const str = (v: string | boolean | undefined): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function parseCommand(command: CommandName, args: string[]): { values: Values; positionals: string[] } {
  const { values, positionals } = parseArgs({ args, options: { ...COMMON, ...COMMANDS[command] }, allowPositionals: true, strict: true });
  return { values: values as Values, positionals };
}

/** Validates arguments before anything connects, so usage errors never wait on a database. */
function dispatch(command: CommandName, values: Values, positionals: string[]): (ctx: CliContext) => Promise<CommandResult<unknown>> {
  const noPositionals = () => {
    if (positionals.length) throw new UsageError(`${command} takes no positional arguments (got ${positionals.join(' ')})`);
  };
  switch (command) {
    case 'status':
      noPositionals();
      if (values['interval-s'] !== undefined) throw new UsageError('--interval-s goes with --watch');
      return statusWith(str(values.since));
    case 'timeline': {
      const [target, ...extra] = positionals;
      if (!target || extra.length)
        throw new UsageError('timeline takes one executor ID or recovery number: afterlife-plane timeline <executorId | N>');
      return (ctx) => timeline(ctx, target);
    }
    case 'logs':
      throw new UsageError('logs is handled before dispatch');
    case 'migrate':
      noPositionals();
      return (ctx) => migrate(ctx, { dbos: values.dbos === true, indexes: values.indexes === true });
    case 'recover': {
      const [executorId, ...extra] = positionals;
      if (!executorId || extra.length)
        throw new UsageError('recover takes exactly one executor ID: afterlife-plane recover <executorId> [--dry-run]');
      return (ctx) => recover(ctx, executorId, { dryRun: values['dry-run'] === true, force: values.force === true });
    }
    case 'reap': {
      noPositionals();
      const raw = values.ticks;
      if (raw !== undefined && (typeof raw !== 'string' || !/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 100)) {
        throw new UsageError(`--ticks must be an integer from 1 to 100 (got "${String(raw)}")`);
      }
      return (ctx) => reap(ctx, { dryRun: values['dry-run'] === true, ticks: raw === undefined ? 2 : Number(raw) });
    }
    case 'retention': {
      noPositionals();
      const raw = values['budget-s'];
      if (raw !== undefined && (typeof raw !== 'string' || !/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 86_400)) {
        throw new UsageError(`--budget-s must be an integer from 1 to 86400 (got "${String(raw)}")`);
      }
      return (ctx) => retention(ctx, { dryRun: values['dry-run'] === true, budgetS: raw === undefined ? 900 : Number(raw) });
    }
    case 'doctor': {
      noPositionals();
      const prefix = values['role-prefix'] ?? 'afterlife';
      if (typeof prefix !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]{0,40}$/.test(prefix))
        throw new UsageError(`--role-prefix must be a SQL identifier of at most 41 characters (got "${String(prefix)}")`);
      return (ctx) => doctor(ctx, { rolePrefix: prefix });
    }
    case 'fork': {
      const [workflowId, ...extra] = positionals;
      if (!workflowId || extra.length)
        throw new UsageError('fork takes exactly one workflow ID: afterlife-plane fork <workflowId> [--from-step N]');
      const raw = values['from-step'];
      let fromStep: number | undefined;
      if (typeof raw === 'string') {
        if (!/^\d+$/.test(raw)) throw new UsageError(`--from-step must be a non-negative integer (got "${raw}")`);
        fromStep = Number(raw);
      }
      return (ctx) => fork(ctx, workflowId, fromStep === undefined ? {} : { fromStep });
    }
    case 'drain': {
      noPositionals();
      const version = values.version;
      if (typeof version !== 'string' || version === '') throw new UsageError('drain needs --version V');
      const rawTimeout = values['timeout-s'];
      if (rawTimeout !== undefined && (typeof rawTimeout !== 'string' || !/^\d+$/.test(rawTimeout) || Number(rawTimeout) < 1)) {
        throw new UsageError(`--timeout-s must be a positive integer (got "${String(rawTimeout)}")`);
      }
      return (ctx) => drain(ctx, { version, wait: values.wait === true, timeoutS: rawTimeout === undefined ? 300 : Number(rawTimeout) });
    }
  }
}

/** `--since` is checked before anything connects; the window is measured back from when status runs. */
function statusWith(since: string | undefined): (ctx: CliContext) => Promise<CommandResult<unknown>> {
  parseSince(since, Date.now());
  return (ctx) => status(ctx, { since: parseSince(since, Date.now()) });
}

function fail(json: boolean, err: unknown, exitCode: 1 | 2): number {
  const message = errorMessage(err);
  const code = err instanceof UsageError ? 'usage' : err instanceof AfterlifeError ? err.code : 'failed';
  const issues = err instanceof ConfigError ? err.issues : undefined;
  if (json) {
    const out: ErrorOutput = { error: { code, message, ...(issues ? { issues } : {}) } };
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } else {
    // A configuration error is a list, one problem a line; each line is still escaped (values come from the env).
    const text = issues ? `invalid configuration:\n${issues.map((i) => `  - ${inline(i)}`).join('\n')}` : inline(message);
    process.stderr.write(`afterlife: ${text}\n`);
    if (exitCode === 2 && err instanceof UsageError) process.stderr.write(`run "afterlife --help" for usage\n`);
  }
  return exitCode;
}

process.exitCode = await main(process.argv.slice(2));
