import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { getReferencesInExpression, parse } from '@cdktn/hcl2json';
import { CONFIG_DEFAULTS, CONFIG_KEYS, loadConfig } from '../../shared/config/index.js';
import { ConfigError } from '../../packages/executor/src/errors.js';
import { IDLE_EVENTS } from '../../shared/reaper/tickLog.js';

/**
 * Offline checks of infra/: what `terraform validate` cannot do here (no google provider in the local
 * mirror, no registry), plus the contracts between the Terraform and the code. Every check returns
 * problems instead of throwing, so a test can plant a break and assert that it is reported.
 *
 * What it checks: every .tf parses; every `${...}` reference resolves to a declared resource, data
 * source, variable, local, module (and module output); module calls pass only declared variables and
 * every required one; each function's runtime, entry point (a registered target), environment (what
 * loadConfig requires, only keys it reads, FUNCTION_TIMEOUT_S from the real timeout), its Pub/Sub
 * delivery (a push subscription with OIDC, retry and dead-letter policies, or an Eventarc trigger that
 * retries) and invokers; every config variable reachable from Terraform, with the code's default; the
 * reaper's database user granted pg_read_all_stats (provision script and output);
 * Scheduler jobs (OIDC, no retries); no public members or broad roles, no provisioners; Redis TLS by
 * default; the source object named by content hash; log-based metrics covering every `event` the code
 * logs; alert policies and the dashboard on metrics the module creates; metadata.yaml in step.
 */

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
type Obj = { [key: string]: Json };

export interface Problem {
  file: string;
  where: string;
  message: string;
}

interface Block {
  file: string;
  body: Obj;
}

interface TfModule {
  dir: string;
  rel: string;
  resources: Map<string, Block>;
  data: Map<string, Block>;
  modules: Map<string, Block>;
  variables: Map<string, Block>;
  outputs: Map<string, Block>;
  locals: Map<string, { file: string; value: Json }>;
  /** Every block in file order, for the walkers. */
  blocks: Array<{ kind: string; name: string } & Block>;
}

/** A module as instantiated: its caller's arguments, resolved in the caller's own scope. */
interface Scope {
  module: TfModule;
  args?: Obj;
  parent?: Scope;
}

export interface CheckOptions {
  /** Targets the code registers (functions-framework names). */
  registeredTargets: ReadonlySet<string>;
  /** Contract targets whose code has not landed yet: reported as warnings, not problems. */
  pendingTargets?: ReadonlySet<string>;
  /** `event` values the code logs; each needs a log-based metric. */
  loggedEvents?: ReadonlySet<string>;
  /**
   * `event` values an idle deployment still logs (shared/reaper/tickLog.ts IDLE_EVENTS): an absence
   * alert, and the dashboard's reaper panel, must count one of these, or quiet logging breaks them.
   */
  idleEvents?: ReadonlySet<string>;
}

export interface CheckResult {
  problems: Problem[];
  warnings: string[];
  /** Per function: its label, entry point and the environment keys it gets (for reports and tests). */
  functions: Array<{ label: string; entryPoint: string | undefined; env: string[] }>;
}

const isObj = (v: Json | undefined): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isExpr = (v: Json | undefined): v is string => typeof v === 'string' && v.includes('${');

/** hcl2json gives nested blocks as arrays of bodies; attributes holding objects as plain objects. */
function first(v: Json | undefined): Obj | undefined {
  if (Array.isArray(v)) return isObj(v[0]) ? v[0] : undefined;
  return isObj(v) ? v : undefined;
}

function dig(body: Obj | undefined, ...path: string[]): Json | undefined {
  let cur: Json | undefined = body;
  for (const key of path) {
    const obj = first(cur);
    if (!obj) return undefined;
    cur = obj[key];
  }
  return cur;
}

/**
 * The top-level `${...}` interpolations of a template string. hcl2json hands template strings back
 * unescaped (a filter such as `a="x" AND ${b}`), which its own expression parser cannot re-read as a
 * whole, so each interpolation is parsed on its own. `$${` is a literal; nested strings and braces nest.
 */
export function interpolations(template: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < template.length) {
    const start = template.indexOf('${', i);
    if (start < 0) break;
    if (start > 0 && template[start - 1] === '$') {
      i = start + 2;
      continue;
    }
    const end = scanExpression(template, start + 2);
    out.push(template.slice(start, end));
    i = end;
  }
  return out;
}

/** From just after `${` to just after its matching `}`, skipping string literals and their templates. */
function scanExpression(s: string, from: number): number {
  let depth = 1;
  let i = from;
  while (i < s.length && depth > 0) {
    const c = s[i];
    if (c === '"') {
      i++;
      while (i < s.length && s[i] !== '"') {
        if (s[i] === '\\') i += 2;
        else if (s.startsWith('${', i)) i = scanExpression(s, i + 2);
        else i++;
      }
      i++;
      continue;
    }
    if (c === '{') depth++;
    else if (c === '}') depth--;
    i++;
  }
  return i;
}

/** Memoised: hcl2json runs Go in WASM; the same expression strings recur across checks. */
const refCache = new Map<string, Promise<string[]>>();
function refsOf(file: string, expr: string): Promise<string[]> {
  let hit = refCache.get(expr);
  if (!hit) {
    hit = Promise.all(interpolations(expr).map((seg) => getReferencesInExpression(file, seg))).then((all) =>
      all.flat().map((r) => r.value),
    );
    refCache.set(expr, hit);
  }
  return hit;
}

// ───────────────────────────── loading ─────────────────────────────

async function tfDirs(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string) => {
    const entries = await readdir(dir, { withFileTypes: true });
    if (entries.some((e) => e.isFile() && e.name.endsWith('.tf'))) out.push(dir);
    for (const e of entries) {
      if (e.isDirectory() && !e.name.startsWith('.')) await walk(join(dir, e.name));
    }
  };
  await walk(root);
  return out.sort();
}

async function loadModule(root: string, dir: string, problems: Problem[]): Promise<TfModule> {
  const mod: TfModule = {
    dir,
    rel: relative(root, dir) || '.',
    resources: new Map(),
    data: new Map(),
    modules: new Map(),
    variables: new Map(),
    outputs: new Map(),
    locals: new Map(),
    blocks: [],
  };
  const files = (await readdir(dir)).filter((f) => f.endsWith('.tf')).sort();
  for (const name of files) {
    const file = join(mod.rel, name);
    let json: Obj;
    try {
      json = (await parse(name, await readFile(join(dir, name), 'utf8'))) as Obj;
    } catch (err) {
      problems.push({ file, where: '(parse)', message: err instanceof Error ? err.message : String(err) });
      continue;
    }
    const declare = (map: Map<string, Block>, kind: string, key: string, body: Obj) => {
      if (map.has(key)) problems.push({ file, where: `${kind} ${key}`, message: 'declared twice' });
      map.set(key, { file, body });
      mod.blocks.push({ kind, name: key, file, body });
    };
    for (const [kind, value] of Object.entries(json)) {
      if (kind === 'resource' || kind === 'data') {
        for (const [type, named] of Object.entries(value as Obj)) {
          for (const [name, bodies] of Object.entries(named as Obj)) {
            declare(kind === 'resource' ? mod.resources : mod.data, kind, `${type}.${name}`, first(bodies) ?? {});
          }
        }
      } else if (kind === 'module' || kind === 'variable' || kind === 'output') {
        const map = kind === 'module' ? mod.modules : kind === 'variable' ? mod.variables : mod.outputs;
        for (const [name, bodies] of Object.entries(value as Obj)) declare(map, kind, name, first(bodies) ?? {});
      } else if (kind === 'locals') {
        for (const body of value as Json[]) {
          for (const [name, v] of Object.entries(body as Obj)) {
            if (mod.locals.has(name)) problems.push({ file, where: `local.${name}`, message: 'declared twice' });
            mod.locals.set(name, { file, value: v });
          }
          mod.blocks.push({ kind, name: '', file, body: body as Obj });
        }
      } else if (kind === 'provider') {
        for (const [name, bodies] of Object.entries(value as Obj)) {
          mod.blocks.push({ kind, name, file, body: first(bodies) ?? {} });
        }
      }
    }
  }
  return mod;
}

// ───────────────────────────── references ─────────────────────────────

const META_ARGS = new Set(['source', 'version', 'providers', 'depends_on', 'count', 'for_each']);

function localTarget(mods: Map<string, TfModule>, from: TfModule, body: Obj): TfModule | undefined {
  const source = body.source;
  if (typeof source !== 'string' || !/^\.\.?\//.test(source)) return undefined;
  return mods.get(resolve(from.dir, source));
}

function resolves(mods: Map<string, TfModule>, mod: TfModule, ref: string, allowed: ReadonlySet<string>): boolean {
  const parts = ref.split('.');
  const [root, a, b] = parts;
  if (root === undefined) return false;
  if (allowed.has(root)) return true;
  switch (root) {
    case 'var':
      return a !== undefined && mod.variables.has(a);
    case 'local':
      return a !== undefined && mod.locals.has(a);
    case 'path':
    case 'terraform':
      return true;
    case 'data':
      return a !== undefined && b !== undefined && mod.data.has(`${a}.${b}`);
    case 'module': {
      const call = a === undefined ? undefined : mod.modules.get(a);
      if (!call) return false;
      const target = localTarget(mods, mod, call.body);
      return b === undefined || target === undefined || target.outputs.has(b);
    }
    default:
      return a !== undefined && mod.resources.has(`${root}.${a}`);
  }
}

async function checkReferences(mods: Map<string, TfModule>, mod: TfModule, problems: Problem[]): Promise<void> {
  const walk = async (file: string, where: string, value: Json, allowed: ReadonlySet<string>): Promise<void> => {
    if (typeof value === 'string') {
      if (!value.includes('${')) return;
      for (const ref of await refsOf(file, value)) {
        if (!resolves(mods, mod, ref, allowed)) {
          problems.push({ file, where, message: `reference ${ref} resolves to nothing declared in ${mod.rel}` });
        }
      }
      return;
    }
    if (Array.isArray(value)) {
      for (const v of value) await walk(file, where, v, allowed);
      return;
    }
    if (!isObj(value)) return;
    for (const [key, v] of Object.entries(value)) {
      if (key === 'dynamic' && isObj(v)) {
        // A dynamic block's iterator (its label, or `iterator`) is in scope only inside its content.
        for (const [label, bodies] of Object.entries(v)) {
          for (const body of Array.isArray(bodies) ? bodies : [bodies]) {
            if (!isObj(body)) continue;
            const iterator = typeof body.iterator === 'string' ? body.iterator.replace(/^\$\{(.*)\}$/, '$1') : label;
            if (body.for_each !== undefined) await walk(file, `${where}.dynamic.${label}`, body.for_each, allowed);
            const inner = new Set([...allowed, iterator]);
            await walk(file, `${where}.dynamic.${label}`, body.content ?? null, inner);
          }
        }
        continue;
      }
      await walk(file, `${where}.${key}`, v, allowed);
    }
  };

  for (const block of mod.blocks) {
    const where = block.kind === 'locals' ? 'locals' : `${block.kind} ${block.name}`;
    if (block.kind === 'variable') {
      // `type` is a type expression (string, object(...)), not references.
      for (const [key, v] of Object.entries(block.body)) if (key !== 'type') await walk(block.file, `${where}.${key}`, v, new Set());
      continue;
    }
    const allowed = new Set<string>();
    if (block.body.for_each !== undefined) allowed.add('each');
    if (block.body.count !== undefined) allowed.add('count');
    if (block.kind === 'resource' || block.kind === 'data') allowed.add('self');
    await walk(block.file, where, block.body, allowed);
  }
}

function checkModuleCalls(mods: Map<string, TfModule>, mod: TfModule, problems: Problem[]): void {
  for (const [name, call] of mod.modules) {
    const where = `module ${name}`;
    const target = localTarget(mods, mod, call.body);
    if (!target) {
      const source = String(call.body.source);
      if (/^\.\.?\//.test(source)) problems.push({ file: call.file, where, message: `module source ${source} has no .tf files` });
      continue;
    }
    for (const arg of Object.keys(call.body)) {
      if (!META_ARGS.has(arg) && !target.variables.has(arg)) {
        problems.push({ file: call.file, where, message: `argument ${arg} is not a variable of ${target.rel}` });
      }
    }
    for (const [variable, decl] of target.variables) {
      if (!('default' in decl.body) && !(variable in call.body)) {
        problems.push({ file: call.file, where, message: `required variable ${variable} of ${target.rel} is not set` });
      }
    }
  }
}

/** terraform-google-modules shape: every variable typed and described, every output described. */
function checkShape(mod: TfModule, problems: Problem[]): void {
  for (const [name, v] of mod.variables) {
    if (v.body.type === undefined) problems.push({ file: v.file, where: `variable ${name}`, message: 'has no type' });
    if (v.body.description === undefined) problems.push({ file: v.file, where: `variable ${name}`, message: 'has no description' });
  }
  for (const [name, o] of mod.outputs) {
    if (o.body.description === undefined) problems.push({ file: o.file, where: `output ${name}`, message: 'has no description' });
  }
}

// ───────────────────────────── resolution ─────────────────────────────

type Resolved = { value: Json; scope: Scope } | undefined;

const PURE_TRAVERSAL = /^\$\{((?:var|local)\.[A-Za-z0-9_\-.]+)\}$/;

/** The default of an optional object attribute, read from the type expression (optional(type, value)). */
function optionalDefault(typeExpr: Json | undefined, field: string): Json | undefined {
  if (typeof typeExpr !== 'string') return undefined;
  const m = new RegExp(`\\b${field}\\s*=\\s*optional\\([^,()]+(?:\\([^()]*\\))?\\s*,\\s*("(?:[^"\\\\]|\\\\.)*"|-?[0-9.]+|true|false)\\s*\\)`).exec(typeExpr);
  if (!m?.[1]) return undefined;
  return JSON.parse(m[1]) as Json;
}

/** Follows var./local. traversals through callers' arguments, defaults and optional() defaults. */
function resolveValue(scope: Scope, value: Json | undefined, depth = 0): Resolved {
  if (value === undefined || depth > 20) return undefined;
  if (typeof value !== 'string') return { value, scope };
  const m = PURE_TRAVERSAL.exec(value);
  if (!m?.[1]) return { value, scope };
  const [root, name, ...rest] = m[1].split('.');
  if (name === undefined) return undefined;
  let base: Resolved;
  let typeExpr: Json | undefined;
  if (root === 'local') {
    base = resolveValue(scope, scope.module.locals.get(name)?.value, depth + 1);
  } else {
    const decl = scope.module.variables.get(name);
    typeExpr = decl?.body.type;
    if (scope.args && name in scope.args && scope.parent) base = resolveValue(scope.parent, scope.args[name], depth + 1);
    else base = resolveValue(scope, decl?.body.default, depth + 1);
  }
  for (const key of rest) {
    if (!base) return undefined;
    const obj = first(base.value);
    const next = obj?.[key];
    if (next === undefined && root === 'var') {
      const def = optionalDefault(typeExpr, key);
      base = def === undefined ? undefined : { value: def, scope };
    } else {
      base = resolveValue(base.scope, next, depth + 1);
    }
    typeExpr = undefined;
  }
  return base;
}

const ENV_KEY_IN_EXPR = /(?:^|[{,\n])\s*"?([A-Z][A-Z0-9_]*)"?\s*=(?!=)/g;

/**
 * The keys of a map expression: object literals, plus the maps it references through var./local.
 * (merge(local.common, local.per_fn.x)), plus `KEY = ` literals inside conditionals. Values are kept
 * when they are plain literals, so literal settings can be validated too.
 */
async function mapEntries(scope: Scope, value: Json | undefined, file: string, depth = 0): Promise<Map<string, Json | undefined>> {
  const out = new Map<string, Json | undefined>();
  if (depth > 20) return out;
  const r = resolveValue(scope, value);
  if (!r) return out;
  if (isObj(r.value)) {
    for (const [k, v] of Object.entries(r.value)) out.set(k, isExpr(v) ? undefined : v);
    return out;
  }
  if (!isExpr(r.value)) return out;
  for (const ref of await refsOf(file, r.value)) {
    if (!/^(var|local)\./.test(ref)) continue;
    for (const [k, v] of await mapEntries(r.scope, `\${${ref.replace(/\."([^"]+)"/g, '.$1')}}`, file, depth + 1)) out.set(k, v);
  }
  for (const m of r.value.matchAll(ENV_KEY_IN_EXPR)) if (m[1] && !out.has(m[1])) out.set(m[1], undefined);
  return out;
}

/** A block that may be static or `dynamic` over one var: its fields as the caller set them. */
function blockOf(scope: Scope, body: Obj, name: string): { present: boolean; field: (f: string) => Resolved } {
  const staticBlock = first(body[name]);
  if (staticBlock) return { present: true, field: (f) => resolveValue(scope, staticBlock[f]) };
  const dyn = first(first(body.dynamic)?.[name]);
  if (!dyn) return { present: false, field: () => undefined };
  const content = first(dyn.content) ?? {};
  const forEach = typeof dyn.for_each === 'string' ? dyn.for_each : '';
  const varName = /var\.([A-Za-z0-9_-]+)/.exec(forEach)?.[1];
  const source = varName ? resolveValue(scope, `\${var.${varName}}`) : undefined;
  const present = source !== undefined && source.value !== null;
  const decl = varName ? scope.module.variables.get(varName) : undefined;
  return {
    present,
    field: (f) => {
      const expr = content[f];
      const viaIterator = typeof expr === 'string' ? new RegExp(`^\\$\\{${name}\\.value\\.([A-Za-z0-9_]+)\\}$`).exec(expr)?.[1] : undefined;
      if (!viaIterator) return resolveValue(scope, expr);
      const obj = source ? first(source.value) : undefined;
      if (obj && viaIterator in obj && source) return resolveValue(source.scope, obj[viaIterator]);
      const def = optionalDefault(decl?.body.type, viaIterator);
      return def === undefined ? undefined : { value: def, scope };
    },
  };
}

// ───────────────────────────── functions ─────────────────────────────

interface FnInstance {
  label: string;
  file: string;
  scope: Scope;
  /** The module call creating it, in the caller (for invokers and scheduler targets). */
  call?: { module: TfModule; name: string };
  body: Obj;
}

function functionInstances(mods: Map<string, TfModule>): FnInstance[] {
  const called = new Set<string>();
  const out: FnInstance[] = [];
  for (const mod of mods.values()) {
    for (const [name, call] of mod.modules) {
      const target = localTarget(mods, mod, call.body);
      if (!target) continue;
      called.add(target.dir);
      for (const [key, res] of target.resources) {
        if (!key.startsWith('google_cloudfunctions2_function.')) continue;
        out.push({
          label: `${mod.rel}: module.${name}`,
          file: call.file,
          scope: { module: target, args: call.body, parent: { module: mod } },
          call: { module: mod, name },
          body: res.body,
        });
      }
    }
  }
  for (const mod of mods.values()) {
    if (called.has(mod.dir)) continue;
    for (const [key, res] of mod.resources) {
      if (key.startsWith('google_cloudfunctions2_function.')) out.push({ label: `${mod.rel}: ${key}`, file: res.file, scope: { module: mod }, body: res.body });
    }
  }
  return out;
}

/** Valid stand-ins for values Terraform computes, so loadConfig reports only missing variables. */
const SAMPLES: Record<string, string> = {
  DATABASE_URL: 'postgres://u@127.0.0.1:5432/d',
  INSTANCE_CONNECTION_NAME: 'project:region:instance',
  DB_IP_TYPE: 'PRIVATE',
  REDIS_URL: 'rediss://:auth@10.0.0.3:6378',
  REDIS_CA_CERT: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
  ORPHANED_VERSION_POLICY: 'leave',
  STUCK_POLICY: 'report',
  FORK_TARGET_VERSION: 'latest',
  REPAIR_MODE: 'rewind',
  DATASOURCE_SCHEMAS: 'dbos',
  DBOS_SCHEMA_MAX_VERSION: '123',
  RETENTION_MAX_COMPLETED: '0',
  RETENTION_MAX_AGE_MS: '0',
  WORKFLOW_GLOBAL_TIMEOUT_MS: '0',
  REAPER_SESSION_EVIDENCE: 'pg_stat_activity',
  REAPER_RECOVERY: 'inline',
  REAPER_LIVENESS_EVIDENCE: 'pg_locks',
  LOG_LEVEL: 'INFO',
  DBOS_SYSTEM_SCHEMA: 'dbos',
  AFTERLIFE_SCHEMA: 'afterlife',
  // The lease must be at least two ticks (shared/config/bounds.ts): the defaults.
  REAPER_TICK_MS: '250',
  REAPER_LEASE_MS: '3000',
  // The TTL must be at least two beats (packages/executor/src/contract/settings.ts): the defaults.
  HEARTBEAT_INTERVAL_MS: '250',
  HEARTBEAT_TTL_MS: '15000',
  // Empty: every floor holds (docs/configuration.md#floors).
  AFTERLIFE_ALLOW_BELOW_FLOOR: '',
};
const sampleFor = (key: string) => SAMPLES[key] ?? (/_MS$/.test(key) ? '60000' : /_S$/.test(key) ? '60' : /(_MAX|_SIZE|REPAIRS)$/.test(key) ? '3' : 'sample');

/** Beyond what loadConfig insists on, what each deployed target needs to do its job. */
const DEPLOY_REQUIRES: Record<string, readonly string[]> = {
  // REDIS_CA_CERT: Memorystore's server CA, without which a rediss:// REDIS_URL cannot verify the server.
  '*': ['FUNCTION_TIMEOUT_S', 'GOOGLE_CLOUD_PROJECT', 'REDIS_URL', 'REDIS_CA_CERT'],
  // The reaper's passes and the topics it publishes to; without them a deploy could not tune them.
  reaper: [
    'EXECUTOR_DEATH_TOPIC',
    'DEAD_LETTER_TOPIC',
    'REAPER_TICK_MS',
    'STUCK_AFTER_MS',
    'STUCK_POLICY',
    'UNKNOWN_EXECUTOR_GRACE_MS',
    'ORPHANED_VERSION_GRACE_MS',
    'REAPER_LEASE_MS',
    'REAPER_DIVERGED_LOOKBACK_MS',
    'REAPER_SESSION_EVIDENCE',
  ],
  drain: ['DRAIN_BUDGET_MS'],
};

/** Variables of shared/config that no deployed function is meant to get, and why. */
const NOT_DEPLOYED: Record<string, string> = {
  DATABASE_URL: 'deploys reach Cloud SQL through the connector (INSTANCE_CONNECTION_NAME)',
};

/** Every variable loadConfig reads reaches some function, unless NOT_DEPLOYED says why not. */
function checkConfigCoverage(result: CheckResult): void {
  const set = new Set(result.functions.flatMap((f) => f.env));
  for (const key of CONFIG_KEYS) {
    if (!set.has(key) && !(key in NOT_DEPLOYED)) {
      result.problems.push({ file: 'infra/main.tf', where: 'local.function_env', message: `${key} (shared/config) cannot be set from Terraform: no function gets it` });
    }
  }
}

/** Whether loadConfig takes this value for this key (everything else minimal and valid). */
function accepts(key: string, value: string): boolean {
  try {
    loadConfig({ DATABASE_URL: SAMPLES.DATABASE_URL, DBOS_APPLICATION_NAME: 'app', [key]: value });
    return true;
  } catch (err) {
    if (err instanceof ConfigError) return false;
    throw err;
  }
}

const AFTERLIFE_FIELD = /^\$\{(?:tostring\()?var\.afterlife\.([a-z0-9_]+)\)?\}$/;

/**
 * The module's `afterlife` variable mirrors shared/config: each environment entry taken from one of its
 * fields must default to what the code defaults to, so leaving a field unset changes nothing.
 */
function checkDefaults(mods: Map<string, TfModule>, problems: Problem[]): void {
  for (const mod of mods.values()) {
    const decl = mod.variables.get('afterlife');
    if (!decl) continue;
    const maps: Array<[string, Json]> = [];
    const collect = (where: string, v: Json | undefined) => {
      if (!isObj(v)) return;
      for (const [key, value] of Object.entries(v)) {
        if (isObj(value)) collect(`${where}.${key}`, value);
        else maps.push([key, value]);
      }
    };
    for (const [name, local] of mod.locals) if (/_env$/.test(name)) collect(`local.${name}`, local.value);
    // contains([...], var.afterlife.<field>) validations, by field.
    const allowed = new Map<string, string[]>();
    for (const v of Array.isArray(decl.body.validation) ? decl.body.validation : [decl.body.validation ?? null]) {
      const cond = isObj(v) ? String(v.condition ?? '') : '';
      for (const m of cond.matchAll(/contains\(\[([^\]]*)\],\s*var\.afterlife\.([a-z0-9_]+)\)/g)) {
        if (m[1] !== undefined && m[2] !== undefined) allowed.set(m[2], [...m[1].matchAll(/"([^"]*)"/g)].map((x) => x[1] ?? ''));
      }
    }
    for (const [key, value] of maps) {
      const field = typeof value === 'string' ? AFTERLIFE_FIELD.exec(value)?.[1] : undefined;
      if (field === undefined || !CONFIG_KEYS.includes(key)) continue;
      // An enum in the code (it rejects a plain identifier) needs a validation, so a typo fails the plan
      // rather than every cold start; and each value the validation lets through must be one the code accepts.
      const options = allowed.get(field);
      if (typeof CONFIG_DEFAULTS[key] === 'string' && !accepts(key, 'not_an_option') && options === undefined) {
        problems.push({ file: decl.file, where: `variable afterlife.${field}`, message: `has no contains([...]) validation, though shared/config accepts only some values of ${key}` });
      }
      for (const option of options ?? []) {
        if (!accepts(key, option)) problems.push({ file: decl.file, where: `variable afterlife.${field}`, message: `its validation allows "${option}", which shared/config rejects for ${key}` });
      }
      const code = CONFIG_DEFAULTS[key];
      const tf = optionalDefault(decl.body.type, field);
      if (code === undefined) continue;
      if (tf === undefined) problems.push({ file: decl.file, where: `variable afterlife.${field}`, message: `has no optional() default; shared/config defaults ${key} to ${JSON.stringify(code)}` });
      else if (String(tf) !== String(code)) {
        problems.push({ file: decl.file, where: `variable afterlife.${field}`, message: `defaults to ${JSON.stringify(tf)}, but shared/config defaults ${key} to ${JSON.stringify(code)}` });
      }
    }
  }
}

function validateEnv(env: Map<string, Json | undefined>): string[] {
  const issues: string[] = [];
  const input: Record<string, string> = {};
  for (const [key, value] of env) {
    if (!CONFIG_KEYS.includes(key)) {
      issues.push(`sets ${key}, which shared/config does not read`);
      continue;
    }
    input[key] = value === undefined || value === null ? sampleFor(key) : String(value);
  }
  try {
    loadConfig(input);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    for (const issue of err.issues) {
      const key = issue.split(':')[0] ?? '';
      const sampled = env.has(key) && (env.get(key) === undefined || env.get(key) === null);
      issues.push(sampled ? `${issue} (check.ts has no valid sample for ${key}: add one to SAMPLES)` : issue);
    }
  }
  return issues;
}

const norm = (ref: string) => ref.split('.').slice(0, 2).join('.');

async function refRoots(file: string, value: Json | undefined): Promise<Set<string>> {
  const out = new Set<string>();
  if (typeof value === 'string' && value.includes('${')) for (const r of await refsOf(file, value)) out.add(norm(r));
  return out;
}

async function checkFunctions(mods: Map<string, TfModule>, opts: CheckOptions, result: CheckResult): Promise<void> {
  const { problems, warnings } = result;
  const jobs = [...mods.values()].flatMap((mod) =>
    [...mod.resources].filter(([k]) => k.startsWith('google_cloud_scheduler_job.')).map(([key, b]) => ({ mod, key, ...b })),
  );

  for (const fn of functionInstances(mods)) {
    const { scope, body, file, label } = fn;
    const problem = (message: string) => problems.push({ file, where: label, message });

    const runtime = resolveValue(scope, dig(body, 'build_config', 'runtime'))?.value;
    if (runtime !== 'nodejs24') problem(`runtime is ${JSON.stringify(runtime)}, not nodejs24 (nodejs20 is decommissioned, nodejs22 deprecated in 2027-04)`);

    const entry = resolveValue(scope, dig(body, 'build_config', 'entry_point'))?.value;
    const entryPoint = typeof entry === 'string' && !isExpr(entry) ? entry : undefined;
    if (entryPoint === undefined) problem(`entry_point is not a literal target name (${JSON.stringify(entry)})`);
    else if (!opts.registeredTargets.has(entryPoint)) {
      if (opts.pendingTargets?.has(entryPoint)) warnings.push(`${label}: entry point ${entryPoint} is not registered yet (its code has not landed)`);
      else problem(`entry_point ${entryPoint} is not a target functions/index.ts registers (${[...opts.registeredTargets].join(', ') || 'none'})`);
    }

    // Environment: plain and secret variables together are what loadConfig sees.
    const service = first(body.service_config) ?? {};
    const env = await mapEntries(scope, service.environment_variables, file);
    const secretBlock = first(first(service.dynamic)?.secret_environment_variables);
    const secrets = secretBlock
      ? await mapEntries(scope, secretBlock.for_each, file)
      : new Map((Array.isArray(service.secret_environment_variables) ? service.secret_environment_variables : []).flatMap((s) => (isObj(s) && typeof s.key === 'string' ? [[s.key, undefined] as const] : [])));
    for (const key of secrets.keys()) {
      if (env.has(key)) problem(`${key} is both a plain and a secret variable`);
      env.set(key, undefined);
    }
    for (const issue of validateEnv(env)) problem(`environment: ${issue}`);
    for (const key of [...(DEPLOY_REQUIRES['*'] ?? []), ...(entryPoint ? (DEPLOY_REQUIRES[entryPoint] ?? []) : [])]) {
      if (!env.has(key)) problem(`environment: ${key} is not set`);
    }
    result.functions.push({ label, entryPoint, env: [...env.keys()].sort() });

    // FUNCTION_TIMEOUT_S must come from the same number as the timeout, or the budget lies.
    const timeoutRefs = await refRoots(file, service.timeout_seconds);
    const envExpr = await envValueExpr(scope, service.environment_variables, 'FUNCTION_TIMEOUT_S', file);
    if (env.has('FUNCTION_TIMEOUT_S')) {
      const fromTimeout = envExpr !== undefined && (await refsOf(file, envExpr)).some((r) => [...timeoutRefs].some((t) => r.startsWith(t)));
      if (!fromTimeout) problem('FUNCTION_TIMEOUT_S is not derived from service_config.timeout_seconds');
    }

    // Eventarc trigger: Pub/Sub, explicit RETRY_POLICY_RETRY.
    const trigger = blockOf(scope, body, 'event_trigger');
    const triggerAccounts = new Set<string>();
    if (trigger.present) {
      const type = trigger.field('event_type')?.value;
      if (type !== 'google.cloud.pubsub.topic.v1.messagePublished') problem(`event_type ${JSON.stringify(type)} is not Pub/Sub messagePublished`);
      const retry = trigger.field('retry_policy')?.value;
      if (retry !== 'RETRY_POLICY_RETRY') problem(`event_trigger retry_policy is ${JSON.stringify(retry)}, not RETRY_POLICY_RETRY`);
      const topic = trigger.field('pubsub_topic');
      const topicRefs = topic ? await refRoots(file, topic.value) : new Set<string>();
      if (![...topicRefs].some((r) => r.startsWith('google_pubsub_topic.'))) problem('event_trigger pubsub_topic is not a google_pubsub_topic');
      const sa = trigger.field('service_account_email');
      for (const r of sa ? await refRoots(file, sa.value) : []) triggerAccounts.add(r);
      if (triggerAccounts.size === 0) problem('event_trigger has no dedicated service_account_email (it would default to the Compute SA)');
    }

    // Push subscriptions delivering to this function (push_endpoint built from module.<call>.uri).
    const pushes = fn.call ? await pushSubscriptionsTo(fn.call.module, fn.call.name) : [];
    for (const push of pushes) {
      const where = `resource ${push.key}`;
      const sub = (message: string) => problems.push({ file: push.file, where, message });
      const oidc = first(dig(push.body, 'push_config', 'oidc_token') ?? null);
      const sa = oidc?.service_account_email;
      for (const r of await refRoots(push.file, sa)) triggerAccounts.add(r);
      if (!sa) sub('push_config has no oidc_token with a service account: the private function would answer 403');
      const endpoint = String(dig(push.body, 'push_config', 'push_endpoint') ?? '');
      if (!/\/projects\/\$\{[^}]+\}\/topics\/\$\{[^}]+\}$/.test(endpoint)) {
        sub(`push_endpoint ${endpoint} does not end in /projects/<project>/topics/<topic>, where functions-framework reads the CloudEvent source`);
      }
      const dlp = first(push.body.dead_letter_policy);
      if (!dlp || ![...(await refRoots(push.file, dlp.dead_letter_topic))].some((r) => r.startsWith('google_pubsub_topic.'))) sub('has no dead_letter_policy on a google_pubsub_topic: a notice that keeps failing would retry until retention ends');
      else if (dlp.max_delivery_attempts === undefined) sub('dead_letter_policy has no max_delivery_attempts');
      const retry = first(push.body.retry_policy);
      if (!retry?.minimum_backoff || !retry.maximum_backoff) sub('has no retry_policy with minimum_backoff and maximum_backoff: nacks would be redelivered at once');
      const ack = String(push.body.ack_deadline_seconds ?? '');
      if (!/min\([^)]*timeout_seconds[^)]*\b600\)/.test(ack)) sub(`ack_deadline_seconds ${ack || '(default 10 s)'} is not min(<function timeout> + slack, 600): Pub/Sub would give up on a push before the function does`);
    }
    if (entryPoint === 'executorDeath' && !trigger.present && pushes.length === 0) problem('executorDeath has no Pub/Sub delivery (a push subscription, or an Eventarc trigger)');

    // Scheduler jobs calling this function (http_target.uri = module.<call>.uri in the caller).
    const schedulerAccounts = new Set<string>();
    for (const job of jobs) {
      const uriRefs = await refRoots(job.file, dig(job.body, 'http_target', 'uri'));
      const targetsThis = fn.call ? job.mod === fn.call.module && uriRefs.has(`module.${fn.call.name}`) : false;
      if (!targetsThis) continue;
      for (const r of await refRoots(job.file, dig(job.body, 'http_target', 'oidc_token', 'service_account_email'))) schedulerAccounts.add(r);
    }
    if (entryPoint === 'reaper' && schedulerAccounts.size === 0) problem('no Cloud Scheduler job with OIDC calls the reaper');

    await checkInvokers(fn, triggerAccounts, schedulerAccounts, problem);
  }
}

/** The expression of one environment key, following var./local. through merge() arguments. */
async function envValueExpr(scope: Scope, value: Json | undefined, key: string, file: string, depth = 0): Promise<string | undefined> {
  const r = resolveValue(scope, value);
  if (!r || depth > 20) return undefined;
  if (isObj(r.value)) {
    const v = r.value[key];
    return v === undefined ? undefined : typeof v === 'string' ? v : JSON.stringify(v);
  }
  if (!isExpr(r.value)) return undefined;
  for (const ref of await refsOf(file, r.value)) {
    if (!/^(var|local)\./.test(ref)) continue;
    const found = await envValueExpr(r.scope, `\${${ref}}`, key, file, depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** google_pubsub_subscription resources of `mod` whose push endpoint is module.<call>'s URI. */
async function pushSubscriptionsTo(mod: TfModule, call: string): Promise<Array<{ key: string } & Block>> {
  const out: Array<{ key: string } & Block> = [];
  for (const [key, res] of mod.resources) {
    if (!key.startsWith('google_pubsub_subscription.')) continue;
    const endpoint = dig(res.body, 'push_config', 'push_endpoint');
    if ((await refRoots(res.file, endpoint)).has(`module.${call}`)) out.push({ key, ...res });
  }
  return out;
}

/**
 * run.invoker only for the trigger's and the scheduler's accounts; operator-supplied members only on
 * functions nothing calls automatically (drain). Invokers are the module's `invokers` map.
 */
async function checkInvokers(fn: FnInstance, triggerAccounts: Set<string>, schedulerAccounts: Set<string>, problem: (m: string) => void): Promise<void> {
  const mod = fn.scope.module;
  const grants = [...mod.resources.values()].filter((r) => r.body.role === 'roles/run.invoker');
  const members = new Set<string>();
  let operatorSupplied = false;
  for (const grant of grants) {
    const member = grant.body.member;
    const forEach = grant.body.for_each;
    if (member === '${each.value}' && typeof forEach === 'string') {
      const src = resolveValue(fn.scope, forEach);
      if (src && isObj(src.value)) {
        for (const v of Object.values(src.value)) for (const r of await refRoots(grant.file, v)) members.add(r);
      } else if (src && isExpr(src.value)) {
        if ((await refsOf(grant.file, src.value)).some((r) => r.startsWith('var.'))) operatorSupplied = true;
        else problem(`invokers come from ${src.value}, which cannot be checked`);
      }
    } else {
      for (const r of await refRoots(grant.file, member)) members.add(r);
    }
  }
  const automatic = new Set([...triggerAccounts, ...schedulerAccounts]);
  for (const m of members) if (!automatic.has(m)) problem(`run.invoker granted to ${m}, which is neither its trigger's nor its scheduler's account`);
  for (const a of automatic) if (!members.has(a)) problem(`its caller ${a} is not granted run.invoker`);
  if (operatorSupplied && automatic.size > 0) problem('operator-supplied invokers on a function that Eventarc or Scheduler calls');
}

// ───────────────────────────── the rest of the resources ─────────────────────────────

const BROAD_ROLES = new Set(['roles/owner', 'roles/editor', 'roles/run.admin', 'roles/pubsub.admin', 'roles/cloudsql.admin', 'roles/secretmanager.admin', 'roles/iam.serviceAccountAdmin']);

async function checkResources(mods: Map<string, TfModule>, opts: CheckOptions, problems: Problem[]): Promise<void> {
  const metricEvents = new Set<string>();
  let metrics = 0;
  for (const mod of mods.values()) {
    // Public members anywhere but a variable's validation are a leak.
    for (const block of mod.blocks) {
      if (block.kind === 'variable') continue;
      const text = JSON.stringify(block.body);
      for (const member of ['allUsers', 'allAuthenticatedUsers']) {
        if (text.includes(`"${member}"`) || text.includes(`:${member}`)) {
          problems.push({ file: block.file, where: `${block.kind} ${block.name}`, message: `grants ${member}: afterlife's functions are private` });
        }
      }
    }
    for (const [key, res] of mod.resources) {
      const where = `resource ${key}`;
      const role = res.body.role;
      if (typeof role === 'string' && BROAD_ROLES.has(role)) problems.push({ file: res.file, where, message: `grants the broad role ${role}` });
      if (role === 'roles/run.invoker' && !(res.body.member === '${each.value}' && /var\.invokers/.test(String(res.body.for_each)))) {
        problems.push({ file: res.file, where, message: 'grants run.invoker outside a function module\'s invokers' });
      }

      // Everything declarative: a provisioner runs outside the plan, needs tools where terraform runs,
      // and drifts silently when what it patched is replaced.
      if (first(res.body.provisioner) !== undefined) problems.push({ file: res.file, where, message: 'has a provisioner (local-exec): keep the module declarative' });

      if (key.startsWith('google_cloud_scheduler_job.')) {
        const retry = dig(res.body, 'retry_config', 'retry_count');
        if (retry !== 0) problems.push({ file: res.file, where, message: `retry_config.retry_count is ${JSON.stringify(retry)}, not 0 (the next tick is the retry)` });
        if (!first(dig(res.body, 'http_target', 'oidc_token') ?? null)?.service_account_email) {
          problems.push({ file: res.file, where, message: 'http_target has no oidc_token with a service account' });
        }
        // Scheduler rejects an HTTP attempt deadline above 1800 s; one derived from a timeout must be clamped.
        const deadline = String(res.body.attempt_deadline ?? '');
        if (isExpr(deadline) && !/min\([^)]*\b1800\b/.test(deadline)) problems.push({ file: res.file, where, message: `attempt_deadline ${deadline} is not clamped to Scheduler's 1800 s maximum` });
        else if (/^\d+s$/.test(deadline) && Number.parseInt(deadline, 10) > 1800) problems.push({ file: res.file, where, message: `attempt_deadline ${deadline} exceeds Scheduler's 1800 s maximum` });
        const schedule = resolveValue({ module: mod }, res.body.schedule)?.value;
        if (schedule !== undefined && schedule !== '* * * * *') problems.push({ file: res.file, where, message: `schedule ${JSON.stringify(schedule)} is not every minute` });
      }

      // Memorystore speaks TLS unless the operator turns it off: a literal, or var.redis.transit_encryption defaulting to true.
      if (key.startsWith('google_redis_instance.')) {
        const mode = String(res.body.transit_encryption_mode ?? 'DISABLED');
        const toggle = /^\$\{var\.redis\.transit_encryption \? "SERVER_AUTHENTICATION" : "DISABLED"\}$/.test(mode);
        const byDefault = toggle && optionalDefault(mod.variables.get('redis')?.body.type, 'transit_encryption') === true;
        if (mode !== 'SERVER_AUTHENTICATION' && !byDefault) problems.push({ file: res.file, where, message: `transit_encryption_mode is ${mode}, not SERVER_AUTHENTICATION by default` });
      }

      if (key.startsWith('google_storage_bucket_object.') && typeof res.body.source === 'string' && res.body.source.includes('data.archive_file.')) {
        if (!/data\.archive_file\.[A-Za-z0-9_-]+\.output_(md5|sha|sha256|base64sha256|sha512)/.test(String(res.body.name))) {
          problems.push({ file: res.file, where, message: 'the source object is not named by the archive\'s content hash, so a code change would not redeploy' });
        }
      }

      if (key.startsWith('google_logging_metric.')) {
        metrics++;
        const filter = String(res.body.filter ?? '');
        const eachKey = /jsonPayload\.event="?\$\{each\.key\}/.test(filter);
        if (eachKey) {
          for (const k of (await mapEntries({ module: mod }, res.body.for_each, res.file)).keys()) metricEvents.add(k);
        } else {
          for (const m of filter.matchAll(/jsonPayload\.event="([a-z_]+)"/g)) if (m[1]) metricEvents.add(m[1]);
        }
        // The one exception: function_errors counts by severity (crashes and system lines carry no event).
        if (!/jsonPayload\.event=/.test(filter) && !/severity>=ERROR/.test(filter)) problems.push({ file: res.file, where, message: 'log metric does not filter on jsonPayload.event' });
      }
    }
  }
  if (opts.loggedEvents && metrics > 0) {
    for (const event of opts.loggedEvents) {
      if (!metricEvents.has(event)) problems.push({ file: 'infra/logging.tf', where: 'local.log_events', message: `the code logs event "${event}" but no log-based metric counts it` });
    }
  }
}

/** A template with its `${local.x}` / `${var.x.y}` string interpolations filled in, recursively. */
function expandTemplate(scope: Scope, value: Json | undefined, depth = 0): string {
  const r = resolveValue(scope, value);
  if (!r || typeof r.value !== 'string' || depth > 10) return '';
  return r.value.replace(/\$\{((?:local|var)\.[A-Za-z0-9_.]+)\}/g, (whole, ref: string) => {
    const inner = resolveValue(r.scope, `\${${ref}}`);
    return inner && typeof inner.value === 'string' && inner.value !== `\${${ref}}` ? expandTemplate(r.scope, inner.value, depth + 1) : whole;
  });
}

/**
 * The reaper's no-kit evidence reads other roles' sessions in pg_stat_activity, which Postgres shows only
 * to pg_read_all_stats members. A module deploying the reaper must grant it: a google_sql_provision_script
 * (gated, it needs the instance's Data API) running the GRANT, and an output carrying the same SQL for
 * those who run it by hand. The provider's schema is not here, so its required arguments are checked too.
 */
function checkStatsGrant(mods: Map<string, TfModule>, problems: Problem[]): void {
  const grants = (sql: string) => /GRANT\s+pg_read_all_stats\s+TO\s+"\$\{local\.db_users(?:\.reaper|\["reaper"\])\}"/.test(sql);
  for (const mod of mods.values()) {
    const reaper = [...mod.modules].find(([, call]) => call.body.entry_point === 'reaper');
    if (!reaper) continue;
    const scope: Scope = { module: mod };
    const scripts = [...mod.resources].filter(([key]) => key.startsWith('google_sql_provision_script.'));
    const granting = scripts.filter(([, res]) => grants(expandTemplate(scope, res.body.script)));
    if (granting.length === 0) {
      problems.push({ file: reaper[1].file, where: `module ${reaper[0]}`, message: 'no google_sql_provision_script grants pg_read_all_stats to local.db_users.reaper' });
    }
    for (const [key, res] of scripts) {
      for (const arg of ['instance', 'database', 'script']) {
        if (res.body[arg] === undefined) problems.push({ file: res.file, where: `resource ${key}`, message: `has no ${arg} (required by the provider; database is required for Postgres)` });
      }
    }
    const outputs = [...mod.outputs].filter(([, o]) => grants(expandTemplate(scope, o.body.value)));
    if (outputs.length === 0) {
      problems.push({ file: reaper[1].file, where: `module ${reaper[0]}`, message: 'no output carries the pg_read_all_stats grant for operators who run the SQL themselves' });
    }
  }
}

// ───────────────────────────── alerts and the dashboard ─────────────────────────────

const USER_METRIC = 'logging.googleapis.com/user';

/** Google's own metrics a policy may use, and the resource type whose instances the module must own. */
const GOOGLE_METRICS: Record<string, string> = {
  'pubsub.googleapis.com/subscription/num_undelivered_messages': 'google_pubsub_subscription',
};

/** What the on-call must hear about: the metric each alert watches, and how. */
export const REQUIRED_ALERTS: Record<string, 'threshold' | 'absent'> = {
  dead_letter: 'threshold',
  poison_message: 'threshold',
  recovery_retry: 'threshold',
  orphaned_version: 'threshold',
  stuck_workflow: 'threshold',
  unguarded_application: 'threshold',
  reaper_ticks: 'absent',
  function_errors: 'threshold',
};

/** What the dashboard must show: recoveries and their latency, deaths, ticks, forks, dead letters. */
export const REQUIRED_PANELS = ['recovery', 'recovery_latency', 'executor_dead', 'reaper_ticks', 'fork', 'dead_letter'];

/** The dashboard panels that say "the reaper is alive": they must chart a metric an idle reaper feeds. */
const IDLE_PANELS = ['reaper_ticks'];

/** Reaper silence the absence alert may tolerate before it fires (the issue's two minutes). */
const REAPER_ABSENCE_MAX_S = 120;

/** The metric names (after `<prefix>/`) the module's google_logging_metric resources create. */
async function moduleMetrics(mod: TfModule): Promise<Map<string, string>> {
  const out = new Map<string, string>(); // metric name → resource address
  for (const [key, res] of mod.resources) {
    if (!key.startsWith('google_logging_metric.')) continue;
    const name = String(res.body.name ?? '');
    if (name === '${var.name_prefix}/${each.key}') {
      for (const k of (await mapEntries({ module: mod }, res.body.for_each, res.file)).keys()) out.set(k, `${key}["${k}"]`);
    } else {
      const m = /^\$\{var\.name_prefix\}\/([a-z0-9_]+)$/.exec(name);
      if (m?.[1]) out.set(m[1], key);
    }
  }
  return out;
}

/** `${var.a.b}` and `${local.x}` filled in with the literal they resolve to (defaults included). */
function fillLiterals(scope: Scope, text: string): string {
  return text.replace(/\$\{((?:var|local)\.[A-Za-z0-9_.]+)\}/g, (whole, ref: string) => {
    const r = resolveValue(scope, `\${${ref}}`);
    const v = r?.value;
    return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : whole;
  });
}

const METRIC_TYPE = /metric\.type="((?:\$\{[^}]*\}|[^"$])*)"/g;
const BURN_RATE = /^select_slo_burn_rate\("\$\{google_monitoring_slo\.([A-Za-z0-9_]+)(?:\[0\])?\.name\}",\s*"(\d+s)"\)$/;
const durationS = (d: string | undefined) => (d && /^\d+s$/.test(d) ? Number.parseInt(d, 10) : undefined);

interface PolicyInstance {
  where: string;
  file: string;
  /** The body as Terraform builds it for this instance: `each.*` filled in, dynamic blocks expanded. */
  body: Obj;
}

function policyInstances(mod: TfModule): PolicyInstance[] {
  const out: PolicyInstance[] = [];
  for (const [key, res] of mod.resources) {
    if (!key.startsWith('google_monitoring_alert_policy.')) continue;
    const forEach = res.body.for_each;
    if (forEach === undefined) {
      out.push({ where: `resource ${key}`, file: res.file, body: instance(res.body, new Map()) });
      continue;
    }
    // `cond ? local.map : {}` or `{ for k, v in local.map : k => v if cond }`: the local map's entries.
    const local = typeof forEach === 'string' ? /local\.([A-Za-z0-9_]+)/.exec(forEach)?.[1] : undefined;
    const map = local ? resolveValue({ module: mod }, `\${local.${local}}`)?.value : undefined;
    if (!isObj(map)) {
      out.push({ where: `resource ${key}`, file: res.file, body: res.body });
      continue;
    }
    for (const [name, entry] of Object.entries(map)) {
      out.push({ where: `resource ${key}["${name}"]`, file: res.file, body: instance(res.body, new Map([['each', { key: name, value: entry }]])) });
    }
  }
  return out;
}

type Iterators = ReadonlyMap<string, { key: Json; value: Json }>;
const ITERATOR_REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)\.(key|value)((?:\.[A-Za-z0-9_]+)*)\}/g;

/** What `${<iterator>.key}` or `${<iterator>.value.a.b}` stands for, or undefined when it is no iterator's. */
function iteratorValue(iterators: Iterators, name: string, which: string, path: string): Json | undefined {
  const it = iterators.get(name);
  if (!it) return undefined;
  let v: Json | undefined = which === 'key' ? it.key : it.value;
  for (const field of path.split('.').slice(1)) v = isObj(v) ? v[field] : undefined;
  return v;
}

/**
 * A body with its iterators' references filled in and its `dynamic` blocks expanded, as Terraform does:
 * a string that is one reference becomes the value it names (a list, a number, null); a reference inside
 * a template becomes its text. A dynamic block whose for_each does not resolve to a list or map is left as
 * written, so the checks after this one see no block where they expect one.
 */
function instance(value: Json, iterators: Iterators): Obj {
  const out = fill(value, iterators);
  return isObj(out) ? out : {};
}

function fill(value: Json, iterators: Iterators): Json {
  if (typeof value === 'string') {
    const whole = new RegExp(`^${ITERATOR_REF.source}$`).exec(value);
    if (whole) {
      const v = iteratorValue(iterators, whole[1] ?? '', whole[2] ?? '', whole[3] ?? '');
      if (v !== undefined) return v;
    }
    return value.replace(ITERATOR_REF, (ref, name: string, which: string, path: string) => {
      const v = iteratorValue(iterators, name, which, path);
      return v === undefined ? ref : typeof v === 'string' ? v : JSON.stringify(v);
    });
  }
  if (Array.isArray(value)) return value.map((v) => fill(v, iterators));
  if (!isObj(value)) return value;
  const out: Obj = {};
  const expanded: Obj = {};
  for (const [key, v] of Object.entries(value)) {
    if (key !== 'dynamic' || !isObj(v)) {
      out[key] = fill(v, iterators);
      continue;
    }
    const unexpanded: Obj = {};
    for (const [label, bodies] of Object.entries(v)) {
      for (const body of Array.isArray(bodies) ? bodies : [bodies]) {
        const items = isObj(body) ? fill(body.for_each ?? null, iterators) : null;
        const content = isObj(body) ? first(body.content) : undefined;
        if (!isObj(body) || !content || !(Array.isArray(items) || isObj(items))) {
          unexpanded[label] = [...(Array.isArray(unexpanded[label]) ? unexpanded[label] : []), body];
          continue;
        }
        const iterator = typeof body.iterator === 'string' ? body.iterator.replace(/^\$\{(.*)\}$/, '$1') : label;
        const made = Object.entries(items).map(([k, item]) =>
          fill(content, new Map([...iterators, [iterator, { key: Array.isArray(items) ? Number(k) : k, value: item }]])),
        );
        expanded[label] = [...(Array.isArray(expanded[label]) ? expanded[label] : []), ...made];
      }
    }
    if (Object.keys(unexpanded).length > 0) out.dynamic = unexpanded;
  }
  // Terraform puts a dynamic block's blocks after the static ones of the same type.
  for (const [label, made] of Object.entries(expanded)) {
    out[label] = [...(Array.isArray(out[label]) ? out[label] : out[label] === undefined ? [] : [out[label]]), ...(made as Json[])];
  }
  return out;
}

/**
 * Alert policies and the dashboard. Each policy: every condition's metric is one the module creates
 * (a log-based metric of logging.tf, or a Google metric of a resource it owns), a markdown
 * documentation block says what to do, and notifications go to var.alerts.notification_channels. The
 * signals of REQUIRED_ALERTS are all covered, the reaper by an absence condition of at most two
 * minutes. The dashboard: a JSON file that parses, whose template variables are all passed, and whose
 * widgets chart only the module's metrics, the REQUIRED_PANELS among them.
 */
async function checkMonitoring(mods: Map<string, TfModule>, problems: Problem[], idleEvents?: ReadonlySet<string>): Promise<void> {
  for (const mod of mods.values()) {
    const metrics = await moduleMetrics(mod);
    const scope: Scope = { module: mod };
    const covered = new Map<string, Array<{ kind: 'threshold' | 'absent'; durationS: number | undefined }>>();
    const policies = policyInstances(mod);

    for (const p of policies) {
      const problem = (message: string) => problems.push({ file: p.file, where: p.where, message });
      const docs = first(p.body.documentation);
      const content = typeof docs?.content === 'string' ? docs.content : undefined;
      if (!docs || !content || content.replace(/\$\{[^}]*\}/g, '').trim().length < 40) problem('has no documentation telling the on-call what to do');
      else if (docs.mime_type !== 'text/markdown') problem('documentation is not text/markdown');
      if (!/var\.alerts\.notification_channels/.test(String(p.body.notification_channels ?? ''))) problem('notification_channels is not var.alerts.notification_channels');

      const conditions = Array.isArray(p.body.conditions) ? p.body.conditions : [];
      if (conditions.length === 0) problem('has no conditions');
      for (const cond of conditions) {
        if (!isObj(cond)) continue;
        const threshold = first(cond.condition_threshold);
        const absent = first(cond.condition_absent);
        const c = threshold ?? absent;
        if (!c) {
          problem('a condition is neither condition_threshold nor condition_absent');
          continue;
        }
        const filter = fillLiterals(scope, typeof c.filter === 'string' ? c.filter : '');
        // A burn-rate condition reads an SLO, not a metric: the SLO must be one this module defines.
        const burn = BURN_RATE.exec(filter);
        if (burn) {
          if (!mod.resources.has(`google_monitoring_slo.${burn[1] ?? ''}`)) problem(`burn-rate condition on google_monitoring_slo.${burn[1] ?? ''}, which this module does not define`);
          continue;
        }
        const types = [...filter.matchAll(METRIC_TYPE)].map((m) => m[1] ?? '');
        if (types.length !== 1) {
          problem(`a condition's filter names ${types.length} metric types (one expected): ${filter}`);
          continue;
        }
        const type = types[0] ?? '';
        let metric: string | undefined;
        if (type.startsWith(`${USER_METRIC}/`)) {
          const ref = type.slice(USER_METRIC.length + 1);
          const m = /^\$\{google_logging_metric\.([A-Za-z0-9_]+)(?:\["([^"]+)"\])?\.name\}$/.exec(ref);
          const address = m ? (m[2] ? `google_logging_metric.${m[1]}["${m[2]}"]` : `google_logging_metric.${m[1]}`) : undefined;
          metric = [...metrics].find(([, a]) => a === address)?.[0];
          if (metric === undefined) problem(`condition metric ${type} is not a log-based metric this module creates`);
        } else if (type in GOOGLE_METRICS) {
          const owner = GOOGLE_METRICS[type] ?? '';
          if (!new RegExp(`\\$\\{${owner}\\.`).test(filter)) problem(`condition on ${type} is not scoped to a ${owner} of this module`);
          metric = type;
        } else {
          problem(`condition metric ${type} is neither a log-based metric of this module nor a known Google metric`);
        }
        if (metric === undefined) continue;
        // An absence alert on a line only busy ticks write would fire on every quiet stretch.
        if (absent && idleEvents && !idleEvents.has(metric)) {
          problem(`the absence alert counts ${metric}, which an idle reaper does not log (idle events: ${[...idleEvents].join(', ')})`);
        }
        const duration = durationS(fillLiterals(scope, typeof c.duration === 'string' ? c.duration : ''));
        const list = covered.get(metric) ?? [];
        list.push({ kind: absent ? 'absent' : 'threshold', durationS: duration });
        covered.set(metric, list);
      }
    }

    // The required alerts belong to the module that deploys the functions (not its examples).
    const deploysReaper = [...mod.modules.values()].some((m) => m.body.entry_point === 'reaper');
    for (const [metric, kind] of deploysReaper ? Object.entries(REQUIRED_ALERTS) : []) {
      const found = (covered.get(metric) ?? []).filter((c) => c.kind === kind);
      if (found.length === 0) {
        problems.push({ file: join(mod.rel, 'monitoring.tf'), where: 'alert policies', message: `no ${kind === 'absent' ? 'metric-absence' : 'threshold'} alert policy on ${metric}` });
      } else if (kind === 'absent' && !found.some((c) => c.durationS !== undefined && c.durationS <= REAPER_ABSENCE_MAX_S)) {
        problems.push({ file: join(mod.rel, 'monitoring.tf'), where: 'alert policies', message: `the absence alert on ${metric} waits ${found.map((c) => c.durationS ?? '?').join(', ')} s, more than ${REAPER_ABSENCE_MAX_S} s` });
      }
    }

    for (const [key, res] of mod.resources) {
      if (!key.startsWith('google_monitoring_dashboard.')) continue;
      await checkDashboard(mod, key, res, metrics, problems, idleEvents);
    }
  }
}

async function checkDashboard(mod: TfModule, key: string, res: Block, metrics: Map<string, string>, problems: Problem[], idleEvents?: ReadonlySet<string>): Promise<void> {
  const where = `resource ${key}`;
  const expr = String(res.body.dashboard_json ?? '');
  const m = /^\$\{templatefile\("\$\{path\.module\}\/([A-Za-z0-9_.-]+\.json)",\s*\{([\s\S]*)\}\)\}$/.exec(expr);
  if (!m?.[1]) {
    problems.push({ file: res.file, where, message: 'dashboard_json is not templatefile("${path.module}/<file>.json", {...})' });
    return;
  }
  const file = join(mod.rel, m[1]);
  const vars = new Map([...(m[2] ?? '').matchAll(/^\s*([a-z_]+)\s*=\s*(.*)$/gm)].map((v) => [v[1] ?? '', (v[2] ?? '').trim()]));
  let text: string;
  let json: Json;
  try {
    text = await readFile(join(mod.dir, m[1]), 'utf8');
    json = JSON.parse(text) as Json;
  } catch (err) {
    problems.push({ file, where: '(json)', message: `not valid JSON: ${err instanceof Error ? err.message : String(err)}` });
    return;
  }
  for (const t of text.matchAll(/(\$\$?)\{([^}]*)\}/g)) {
    if (t[1] === '$' && !vars.has(t[2] ?? '')) problems.push({ file, where: '(template)', message: `\${${t[2]}} is not a variable templatefile passes (${[...vars.keys()].join(', ')})` });
  }
  if (/%\{/.test(text)) problems.push({ file, where: '(template)', message: '%{ is a template directive in templatefile; escape it as %%{' });
  if (vars.get('metric_prefix') !== `"\${local.user_metric}/\${var.name_prefix}"`) {
    problems.push({ file: res.file, where, message: `metric_prefix is ${vars.get('metric_prefix') ?? 'not passed'}, not "\${local.user_metric}/\${var.name_prefix}"` });
  }
  const shown = new Set<string>();
  const walk = (v: Json, path: string): void => {
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}[${i}]`));
    else if (isObj(v)) {
      for (const [k, x] of Object.entries(v)) {
        if (k === 'filter' && typeof x === 'string') {
          const types = [...x.matchAll(/metric\.type="([^"]*)"/g)].map((t) => t[1] ?? '');
          if (types.length === 0) problems.push({ file, where: path, message: `filter names no metric type: ${x}` });
          for (const type of types) {
            const name = /^\$\{metric_prefix\}\/([a-z0-9_]+)$/.exec(type)?.[1];
            if (name === undefined || !metrics.has(name)) problems.push({ file, where: path, message: `widget charts ${type}, which is not a metric this module creates` });
            else shown.add(name);
          }
        } else if (/query$/i.test(k) && typeof x === 'string' && k !== 'timeSeriesQuery') {
          problems.push({ file, where: `${path}.${k}`, message: 'a query language widget cannot be checked; use timeSeriesFilter' });
        } else walk(x, `${path}.${k}`);
      }
    }
  };
  walk(json, '$');
  for (const panel of REQUIRED_PANELS) if (!shown.has(panel)) problems.push({ file, where: '(widgets)', message: `no widget charts ${panel}` });
  for (const panel of idleEvents ? IDLE_PANELS : []) {
    if (!idleEvents?.has(panel)) problems.push({ file, where: '(widgets)', message: `the reaper panel charts ${panel}, which an idle reaper does not log (idle events: ${[...(idleEvents ?? [])].join(', ')})` });
  }
}

// ───────────────────────────── the recovery SLO ─────────────────────────────

/** The recovery_timeline fields the SLO's log-based distributions carry (shared/timeline/view.ts). */
export const RECOVERY_TIME_FIELDS = { death_to_reenqueued: 'deathToReenqueuedMs', death_to_first_step: 'deathToFirstStepMs' } as const;
/** The burn-rate windows a recovery SLO's alerts must watch: fast (1 h with 5 min) and slow (6 h with 30 min). */
export const BURN_WINDOWS = [
  ['3600s', '300s'],
  ['21600s', '1800s'],
] as const;
const SLO_DEFAULTS = { threshold_ms: 5000, goal: 0.99, rolling_period_days: 28 };

/**
 * Recovery as a number (issue 29), in the module that deploys the reaper: a log-based DISTRIBUTION with
 * exponential buckets for each of RECOVERY_TIME_FIELDS on `recovery_timeline` lines; a custom service and
 * an SLO whose distribution cut reads the death → first step metric, with its threshold, goal and period
 * from variables whose defaults are 5 s, 99 % and 28 days; burn-rate alert policies on that SLO covering
 * every BURN_WINDOWS pair with both windows in one AND policy; and a dashboard heatmap of the distribution.
 */
async function checkRecoverySlo(mods: Map<string, TfModule>, problems: Problem[]): Promise<void> {
  for (const mod of mods.values()) {
    if (![...mod.modules.values()].some((m) => m.body.entry_point === 'reaper')) continue;
    const scope: Scope = { module: mod };
    const problem = (where: string, message: string) => problems.push({ file: join(mod.rel, 'slo.tf'), where, message });
    const metrics = await moduleMetrics(mod);
    for (const [name, field] of Object.entries(RECOVERY_TIME_FIELDS)) {
      const address = metrics.get(name);
      const res = address ? mod.resources.get(address.replace(/\[".*"\]$/, '')) : undefined;
      const each = new Map([['each', { key: name, value: field }]]);
      const body = res ? instance(res.body, each) : undefined;
      const filter = fillLiterals(scope, String(body?.filter ?? ''));
      const descriptor = first(body?.metric_descriptor);
      const exponential = first(first(body?.bucket_options)?.exponential_buckets);
      if (!body) problem('log-based metrics', `no log-based metric ${name} (${field} of recovery_timeline lines)`);
      else if (!filter.includes('jsonPayload.event=\\"recovery_timeline\\"') && !filter.includes('jsonPayload.event="recovery_timeline"')) problem(address ?? name, 'does not count recovery_timeline lines');
      else if (descriptor?.value_type !== 'DISTRIBUTION' || body.value_extractor !== `EXTRACT(jsonPayload.${field})`) problem(address ?? name, `is not a DISTRIBUTION of jsonPayload.${field}`);
      else if (!exponential) problem(address ?? name, 'has no exponential buckets');
    }
    const service = [...mod.resources.keys()].find((k) => k.startsWith('google_monitoring_custom_service.'));
    if (!service) problem('SLO', 'no google_monitoring_custom_service for the recovery SLO');
    const slos = [...mod.resources].filter(([k]) => k.startsWith('google_monitoring_slo.'));
    const slo = slos.find(([, r]) => /recovery_time\[\\"death_to_first_step\\"\]/.test(JSON.stringify(r.body.request_based_sli ?? null)));
    if (!slo) {
      problem('SLO', 'no google_monitoring_slo whose distribution cut reads the death_to_first_step metric');
      continue;
    }
    const [sloKey, sloRes] = slo;
    const cut = first(first(sloRes.body.request_based_sli)?.distribution_cut);
    const settings = { threshold_ms: first(cut?.range)?.max, goal: sloRes.body.goal, rolling_period_days: sloRes.body.rolling_period_days };
    for (const [key, expr] of Object.entries(settings)) {
      const want = SLO_DEFAULTS[key as keyof typeof SLO_DEFAULTS];
      const r = typeof expr === 'string' && /^\$\{var\.[A-Za-z0-9_.]+\}$/.test(expr) ? resolveValue(scope, expr) : undefined;
      if (!r) problem(`resource ${sloKey}`, `${key} is not set from a variable (${JSON.stringify(expr ?? null)})`);
      else if (r.value !== want) problem(`resource ${sloKey}`, `${key} defaults to ${JSON.stringify(r.value ?? null)}, not ${want}`);
    }
    const windows = policyInstances(mod).flatMap((p) => {
      const conds = (Array.isArray(p.body.conditions) ? p.body.conditions : []).map((c) => (isObj(c) ? first(c.condition_threshold) : undefined));
      const burns = conds.map((c) => BURN_RATE.exec(fillLiterals(scope, String(c?.filter ?? ''))));
      if (!burns.some(Boolean)) return [];
      if (p.body.combiner !== 'AND') problem(p.where, 'a burn-rate policy must combine its windows with AND');
      return [burns.map((b) => (b && `google_monitoring_slo.${b[1]}` === sloKey ? b[2] : undefined)).filter((w): w is string => w !== undefined)];
    });
    for (const [long, short] of BURN_WINDOWS) {
      if (!windows.some((w) => w.includes(long) && w.includes(short))) problem('alert policies', `no burn-rate alert policy on ${sloKey} over ${long} and ${short}`);
    }
    let tiles: Json[] | undefined;
    try {
      tiles = (JSON.parse(await readFile(join(mod.dir, 'dashboard.json'), 'utf8')) as { mosaicLayout?: { tiles?: Json[] } }).mosaicLayout?.tiles;
    } catch {
      continue; // checkDashboard reports a dashboard that does not parse
    }
    const heatmap = tiles?.some((t) => {
      const text = JSON.stringify(t);
      return text.includes('"plotType":"HEATMAP"') && text.includes('/death_to_first_step\\"');
    });
    if (!heatmap) problem('dashboard.json', 'no HEATMAP widget of death_to_first_step');
  }
}

// ───────────────────────────── blueprint metadata ─────────────────────────────

/**
 * infra/metadata.yaml (BlueprintMetadata) lists the module's variables, outputs and APIs; it is only
 * worth having while it is true, so each list must match the module exactly. Read line by line: the file
 * keeps to `- name: x` items under `variables:` / `outputs:` and `- <api>` under `services:`.
 */
async function checkMetadata(root: string, mods: Map<string, TfModule>, problems: Problem[]): Promise<void> {
  const mod = mods.get(root);
  const path = join(root, 'metadata.yaml');
  if (!mod || !existsSync(path)) return;
  const lists = new Map<string, string[]>();
  let section = '';
  for (const line of (await readFile(path, 'utf8')).split('\n')) {
    const head = /^\s*(variables|outputs|services):\s*$/.exec(line);
    if (head?.[1]) section = head[1];
    else if (/^\s{0,4}[a-zA-Z]+:/.test(line) && !/^\s*- /.test(line)) section = /^\s*(roles|providerVersions|requirements|examples):/.test(line) ? '' : section;
    const item = section === 'services' ? /^\s*- ([a-z]+\.googleapis\.com)\s*$/.exec(line) : /^\s*- name: ([a-z_]+)\s*$/.exec(line);
    if (section && item?.[1]) lists.set(section, [...(lists.get(section) ?? []), item[1]]);
  }
  const compare = (what: string, listed: string[], actual: string[]) => {
    for (const n of actual) if (!listed.includes(n)) problems.push({ file: 'metadata.yaml', where: what, message: `${n} is in the module but not in metadata.yaml` });
    for (const n of listed) if (!actual.includes(n)) problems.push({ file: 'metadata.yaml', where: what, message: `${n} is listed but not in the module` });
  };
  compare('variables', lists.get('variables') ?? [], [...mod.variables.keys()]);
  compare('outputs', lists.get('outputs') ?? [], [...mod.outputs.keys()]);
  const apis = mod.resources.get('google_project_service.this');
  const enabled = [...JSON.stringify(apis?.body.for_each ?? '').matchAll(/([a-z]+\.googleapis\.com)/g)].map((m) => m[1] ?? '');
  compare('services', lists.get('services') ?? [], enabled);
}

// ───────────────────────────── entry points ─────────────────────────────

export async function checkInfra(root: string, opts: CheckOptions): Promise<CheckResult> {
  const result: CheckResult = { problems: [], warnings: [], functions: [] };
  const mods = new Map<string, TfModule>();
  for (const dir of await tfDirs(root)) mods.set(dir, await loadModule(root, dir, result.problems));
  for (const mod of mods.values()) {
    await checkReferences(mods, mod, result.problems);
    checkModuleCalls(mods, mod, result.problems);
    checkShape(mod, result.problems);
  }
  await checkFunctions(mods, opts, result);
  checkConfigCoverage(result);
  checkDefaults(mods, result.problems);
  checkStatsGrant(mods, result.problems);
  await checkResources(mods, opts, result.problems);
  await checkMonitoring(mods, result.problems, opts.idleEvents);
  await checkRecoverySlo(mods, result.problems);
  await checkMetadata(root, mods, result.problems);
  return result;
}

const run = promisify(execFile);

/**
 * Which of `names` the code registers, asked of functions-framework itself (getFunction) in a child
 * process, so importing the functions (and their SIGTERM handlers) never touches the test worker.
 */
export async function registeredTargets(repoRoot: string, names: readonly string[]): Promise<Set<string>> {
  const index = pathToFileURL(join(repoRoot, 'functions', 'index.ts')).href;
  const script = [
    `const { getFunction } = await import('@google-cloud/functions-framework/testing');`,
    `await import(${JSON.stringify(index)});`,
    `const names = ${JSON.stringify(names)};`,
    `process.stdout.write(JSON.stringify(names.filter((n) => getFunction(n) !== undefined)));`,
    `process.exit(0);`,
  ].join('\n');
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: repoRoot, timeout: 60_000 });
  return new Set(JSON.parse(stdout) as string[]);
}

/**
 * `event` values afterlife's functions log (`event: 'name'` in functions/ and shared/, tests excluded).
 * The kit (packages/executor) runs inside the DBOS apps: its lines land in the apps' services, which the
 * metrics (scoped to afterlife's services) do not read; the common layers it carries log no events.
 */
export async function loggedEvents(repoRoot: string): Promise<Set<string>> {
  const out = new Set<string>();
  const walk = async (dir: string): Promise<void> => {
    if (!existsSync(dir)) return;
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory() && e.name !== 'testing') await walk(path);
      else if (e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) {
        for (const m of (await readFile(path, 'utf8')).matchAll(/\bevent:\s*['"]([a-z][a-z0-9_]*)['"]/g)) if (m[1]) out.add(m[1]);
      }
    }
  };
  await walk(join(repoRoot, 'functions'));
  await walk(join(repoRoot, 'shared'));
  return out;
}

export const TERRAFORM = '/usr/local/bin/terraform';

/** `terraform fmt -check -recursive`; null when terraform is not installed. */
export async function terraformFmt(root: string): Promise<Problem[] | null> {
  if (!existsSync(TERRAFORM)) return null;
  // An existing empty CLI config silences "Unable to open CLI configuration file".
  const dir = await mkdtemp(join(tmpdir(), 'tfcli-'));
  const cliConfig = join(dir, 'terraformrc');
  await writeFile(cliConfig, '');
  try {
    // Run inside root so the listed files are relative to it, wherever the checkout lives.
    await run(TERRAFORM, ['fmt', '-check', '-recursive', '-list=true', '.'], { cwd: root, env: { ...process.env, TF_CLI_CONFIG_FILE: cliConfig } });
    return [];
  } catch (err) {
    const stdout = (err as { stdout?: string }).stdout ?? '';
    const files = stdout.split('\n').filter(Boolean);
    if (files.length === 0) return [{ file: root, where: 'terraform fmt', message: err instanceof Error ? err.message : String(err) }];
    return files.map((file) => ({ file: relative(root, resolve(root, file)) || file, where: 'terraform fmt', message: 'not formatted (run terraform fmt -recursive infra/)' }));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export const CONTRACT_TARGETS = ['executorDeath', 'reaper', 'drain'] as const;

/** Contract targets whose functions/<target>/ folder does not exist yet. */
export function pendingTargets(repoRoot: string, registered: ReadonlySet<string>): Set<string> {
  return new Set(CONTRACT_TARGETS.filter((t) => !registered.has(t) && !existsSync(join(repoRoot, 'functions', t))));
}

/** `npx tsx test/infra/check.ts [infra-dir]`: prints problems, exits 1 when there are any. */
async function main(): Promise<void> {
  const repoRoot = resolve(dirname(new URL(import.meta.url).pathname), '..', '..');
  const root = resolve(process.argv[2] ?? join(repoRoot, 'infra'));
  const registered = await registeredTargets(repoRoot, CONTRACT_TARGETS);
  const result = await checkInfra(root, {
    registeredTargets: registered,
    pendingTargets: pendingTargets(repoRoot, registered),
    loggedEvents: await loggedEvents(repoRoot),
    idleEvents: new Set(IDLE_EVENTS),
  });
  const fmt = await terraformFmt(root);
  const problems = [...result.problems, ...(fmt ?? [])];
  for (const w of result.warnings) console.warn(`warning: ${w}`);
  if (fmt === null) console.warn(`warning: ${TERRAFORM} not found; terraform fmt skipped`);
  for (const p of problems) console.log(`${p.file}: ${p.where}: ${p.message}`);
  console.log(`${problems.length} problem(s) in ${root}`);
  process.exitCode = problems.length > 0 ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) await main();
