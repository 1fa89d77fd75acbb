import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRuntime } from '../../functions/runtime.js';
import '../../functions/index.js';
import { StatusOutput } from '../../cli/schemas.js';
import { parseJson, runCli } from '../helpers/cli.js';
import { packKit } from '../helpers/packKit.js';
import { serve } from '../helpers/cloudEvents.js';
import { uniqueName, waitFor } from '../helpers/db.js';
import { FAST_REAPER_ENV } from '../helpers/reaper.js';
import { testRuntime } from '../helpers/runtime.js';
import { ADMIN_DATABASE_URL, databaseUrl, TEST_REDIS_URL } from '../helpers/services.js';

/**
 * Issue 24, acceptance: the kit as a user gets it. `npm pack` of packages/executor, installed into fresh
 * CommonJS and ESM apps (the CommonJS one is examples/queue-worker: a DBOSClient producer process, a queue,
 * worker processes) next to @dbos-inc/dbos-sdk 5.2.11 and 5.3.0, from the npm cache (nothing else is
 * fetched). Each app: one copy of the SDK in its tree; the install-size budget; both workers attach with no
 * kit configuration beyond REDIS_URL; a SIGKILLed worker's workflows are recovered by the served reaper
 * (functions-framework, invoked as Cloud Scheduler does) and finish on the other; a SIGTERM drains (exit 0,
 * nothing ERROR or CANCELLED). Installing from the directory (a symlink) works too: the kit uses the DBOS
 * the app launched, not the checkout's.
 *
 * Issue 28: the kit is a dual package (tshy): attw finds no problem in the tarball; in the DBOS 5.3.0 app,
 * TypeScript workers with the plain static import compile with the repo's tsc and run — CommonJS
 * (`module` node16, as DBOS's templates; commonjs and nodenext compile too) and ESM (`module` nodenext) — and
 * attach with no configuration beyond DBOS's own. The footprint budget: at most 12 packages and 5 MB added
 * to an app that has the SDK and pins pg 8.11.3, none of its packages changed.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const KIT_DIR = join(ROOT, 'packages/executor');
const EXAMPLE = join(ROOT, 'examples/queue-worker');
/** Issue 28's budget: what the kit may add to an app that already has @dbos-inc/dbos-sdk (and pg). */
const MAX_PACKAGES_ADDED = 12;
const MAX_BYTES_ADDED = 5e6;
const SDK_VERSIONS = ['5.2.11', '5.3.0'] as const;
/** The app's own pg, older than the repo's (DBOS itself asks for ^8.11.3). */
const APP_PG = '8.11.3';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}, timeoutMs = 120_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

async function npm(args: string[], cwd: string): Promise<string> {
  const r = await run('npm', [...args, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], cwd);
  if (r.code !== 0) throw new Error(`npm ${args.join(' ')} in ${cwd} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

function lockPackages(dir: string): number {
  const lock = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };
  return Object.keys(lock.packages).filter((k) => k !== '').length;
}

function lockVersions(dir: string): Map<string, string | undefined> {
  const lock = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
  return new Map(Object.entries(lock.packages).flatMap(([k, v]) => (k === '' ? [] : [[k, v.version]])));
}

function bytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) n += bytes(p);
    else if (e.isFile()) n += statSync(p).size;
  }
  return n;
}

/** Every installed copy of the SDK in the app's tree (nested ones included). */
function sdkCopies(dir: string): string[] {
  const out: string[] = [];
  const walk = (nm: string) => {
    let entries: string[];
    try {
      entries = readdirSync(nm);
    } catch {
      return;
    }
    for (const name of entries) {
      if (name === '@dbos-inc') {
        for (const sub of readdirSync(join(nm, name))) {
          if (sub === 'dbos-sdk') out.push(join(nm, name, sub));
          walk(join(nm, name, sub, 'node_modules'));
        }
      } else if (name.startsWith('@')) {
        for (const sub of readdirSync(join(nm, name))) walk(join(nm, name, sub, 'node_modules'));
      } else if (!name.startsWith('.')) walk(join(nm, name, 'node_modules'));
    }
  };
  walk(join(dir, 'node_modules'));
  return out;
}

/** The ESM app: the same worker, producer and migration as examples/queue-worker, as ES modules. */
const ESM_FILES: Record<string, string> = {
  'tasks.js': `import { DBOS } from '@dbos-inc/dbos-sdk';
export const QUEUE = 'tasks';
export const WORKFLOW = 'taskWorkflow';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export function registerTasks() {
  return DBOS.registerWorkflow(async function taskWorkflow(spec) {
    const done = [];
    for (let i = 1; i <= spec.steps; i++) done.push(await DBOS.runStep(async () => { await sleep(spec.stepMs); return DBOS.executorID + ':' + i; }, { name: 'step-' + i }));
    return done;
  }, { name: WORKFLOW });
}
`,
  'worker.js': `import { DBOS } from '@dbos-inc/dbos-sdk';
import { attachExecutor } from 'afterlife-executor';
import { QUEUE, registerTasks } from './tasks.js';
DBOS.setConfig({ name: process.env.APP_NAME, systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL, runMigrations: false, logLevel: 'warn' });
registerTasks();
await DBOS.launch();
await DBOS.registerQueue(QUEUE, { workerConcurrency: 4 });
const kit = await attachExecutor();
console.log(JSON.stringify({ event: 'worker_ready', executorId: kit.executorId, applicationVersion: kit.applicationVersion }));
`,
  'producer.js': `import { DBOSClient } from '@dbos-inc/dbos-sdk';
import { QUEUE, WORKFLOW } from './tasks.js';
const [count = '1', prefix = 'task', steps = '3', stepMs = '500'] = process.argv.slice(2);
const client = await DBOSClient.create({ systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL, applicationName: process.env.APP_NAME });
const ids = [];
for (let i = 0; i < Number(count); i++) { await client.enqueue({ workflowName: WORKFLOW, queueName: QUEUE, workflowID: prefix + '-' + i }, { steps: Number(steps), stepMs: Number(stepMs) }); ids.push(prefix + '-' + i); }
await client.destroy();
console.log(JSON.stringify({ event: 'enqueued', ids }));
`,
  'migrate.js': `import { DBOS } from '@dbos-inc/dbos-sdk';
await DBOS.migrate(process.env.DBOS_SYSTEM_DATABASE_URL);
`,
};

/**
 * Issue 28: TypeScript workers as DBOS apps are written, each with the plain static import. Each prints the
 * kit build it resolved (the CommonJS one through `require`, the ES module one through `import`).
 */
const TS_CJS_WORKER = `// CommonJS TypeScript, as DBOS's templates ("module": "node16", no "type": "module").
import { DBOS } from '@dbos-inc/dbos-sdk';
import { attachExecutor } from 'afterlife-executor';
import { getResultWithRepair } from 'afterlife-executor/repair';

async function main(): Promise<void> {
  DBOS.setConfig({ name: process.env.APP_NAME ?? 'ts-cjs', systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL, runMigrations: false, logLevel: 'warn' });
  await DBOS.launch();
  const kit = await attachExecutor();
  console.log(JSON.stringify({ event: 'worker_ready', executorId: kit.executorId, build: require.resolve('afterlife-executor'), repair: typeof getResultWithRepair }));
}
void main();
`;
const TS_ESM_WORKER = `// An ES module TypeScript app ("module": "nodenext", "type": "module"), top-level await.
import { DBOS } from '@dbos-inc/dbos-sdk';
import { attachExecutor } from 'afterlife-executor';
import { getResultWithRepair } from 'afterlife-executor/repair';

DBOS.setConfig({ name: process.env.APP_NAME ?? 'ts-esm', systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL, runMigrations: false, logLevel: 'warn' });
await DBOS.launch();
const kit = await attachExecutor();
console.log(JSON.stringify({ event: 'worker_ready', executorId: kit.executorId, build: import.meta.resolve('afterlife-executor'), repair: typeof getResultWithRepair }));
`;

/** A tsconfig as `tsc --init` and DBOS's templates write one (strict, skipLibCheck); @types/node is the repo's. */
function tsconfig(module: string, moduleResolution: string, outDir: string | undefined): string {
  return JSON.stringify({
    compilerOptions: {
      target: 'es2022',
      module,
      moduleResolution,
      strict: true,
      esModuleInterop: true,
      skipLibCheck: true,
      rootDir: '.',
      ...(outDir ? { outDir } : { noEmit: true }),
      types: ['node'],
      typeRoots: [join(ROOT, 'node_modules/@types')],
    },
    include: ['worker.ts'],
  });
}

interface Worker {
  child: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
}

describe('the kit package, installed as a user installs it', () => {
  let work: string;
  let tarball: string;
  const workers: Worker[] = [];
  const databases: string[] = [];
  const budget: string[] = [];
  const apps = new Map<string, string>();
  const appDir = (key: string) => {
    const dir = apps.get(key);
    if (!dir) throw new Error(`no app ${key}`);
    return dir;
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'afterlife-kit-pkg-'));
    // One pack at a time: the prepack rebuilds packages/executor/dist in place (test/helpers/packKit.ts).
    const info = await packKit(work);
    tarball = join(work, info.filename);
    // A dual package whose types resolve under every condition (issue 28): attw's exit code says so.
    const attw = await run(
      process.execPath,
      [join(ROOT, 'node_modules/@arethetypeswrong/cli/dist/index.js'), tarball, '--format', 'ascii'],
      work,
    );
    expect(attw.code, `attw found problems in the packed kit:\n${attw.stdout}${attw.stderr}`).toBe(0);
    // Only the kit: no tests, no infra, no benches, no plane; and its licence.
    expect(
      info.files.every((f) =>
        /^(dist\/(esm|commonjs)\/(.+\.(js|d\.ts)|package\.json)|package\.json|repair\/package\.json|README\.md|LICENSE)$/.test(f.path),
      ),
    ).toBe(true);
    expect(info.files.map((f) => f.path)).toContain('LICENSE');
    // The apps install side by side (one npm cache): the scenarios below are what takes time.
    const made = await Promise.all([
      ...(['cjs', 'esm'] as const).flatMap((kind) =>
        SDK_VERSIONS.map(async (sdk) => [`${kind}-${sdk}`, await freshApp(kind, sdk, tarball)] as const),
      ),
      freshApp('cjs', '5.2.11', KIT_DIR).then((dir) => ['link', dir] as const),
    ]);
    for (const [key, dir] of made) apps.set(key, dir);
  }, 300_000);
  afterAll(async () => {
    for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
    await admin.connect();
    for (const d of databases) await admin.query(`DROP DATABASE IF EXISTS ${d} WITH (FORCE)`);
    await admin.end();
    if (budget.length)
      console.log(
        `[kit package] install budget (≤ ${MAX_PACKAGES_ADDED} packages, ≤ ${MAX_BYTES_ADDED / 1e6} MB added):\n${budget.join('\n')}`,
      );
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** A fresh app with the SDK, then the kit from `kitSpec` (the tarball or the directory); the budget measured. */
  async function freshApp(kind: 'cjs' | 'esm', sdk: string, kitSpec: string): Promise<string> {
    const dir = join(work, `${kind}-${sdk}-${uniqueName('app')}`);
    mkdirSync(dir);
    if (kind === 'cjs') {
      cpSync(EXAMPLE, dir, { recursive: true, filter: (src) => !src.includes('node_modules') });
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
      delete pkg.dependencies['@dbos-inc/dbos-sdk'];
      writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg, null, 2));
    } else {
      writeFileSync(
        join(dir, 'package.json'),
        JSON.stringify({ name: 'esm-app', version: '0.0.0', private: true, type: 'module' }, null, 2),
      );
      for (const [f, text] of Object.entries(ESM_FILES)) writeFileSync(join(dir, f), text);
    }
    // The app pins pg below the repo's own (issue 28): the kit must leave the host's versions alone.
    await npm(['install', '--save-exact', `@dbos-inc/dbos-sdk@${sdk}`, `pg@${APP_PG}`], dir);
    const before = { packages: lockPackages(dir), bytes: bytes(join(dir, 'node_modules')), versions: lockVersions(dir) };
    await npm(['install', kitSpec], dir);
    const after = { packages: lockPackages(dir), bytes: bytes(join(dir, 'node_modules')), versions: lockVersions(dir) };
    const added = after.packages - before.packages;
    const changed = [...before.versions].filter(([path, version]) => after.versions.get(path) !== version);
    expect(changed, 'packages of the app the kit changed or removed').toEqual([]);
    expect(after.versions.get('node_modules/pg')).toBe(APP_PG);
    if (kitSpec === tarball) {
      budget.push(
        `  ${kind} app, @dbos-inc/dbos-sdk ${sdk}, pg ${APP_PG}: ${before.packages} → ${after.packages} packages (+${added}), +${((after.bytes - before.bytes) / 1e6).toFixed(1)} MB, none changed`,
      );
      expect(added).toBeLessThanOrEqual(MAX_PACKAGES_ADDED);
      expect(after.bytes - before.bytes).toBeLessThanOrEqual(MAX_BYTES_ADDED);
    }
    expect(sdkCopies(dir)).toEqual([join(dir, 'node_modules/@dbos-inc/dbos-sdk')]);
    return dir;
  }

  /** A fresh, empty database migrated as the app's own operator would: DBOS by the app's SDK, then afterlife. */
  async function freshDatabase(dir: string, app: string): Promise<{ url: string; sql: pg.Pool }> {
    const name = `afterlife_pkg_${process.pid}_${databases.length}_${Date.now() % 100_000}`;
    const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    databases.push(name);
    const url = databaseUrl(name);
    const m = await run(process.execPath, ['migrate.js'], dir, { DBOS_SYSTEM_DATABASE_URL: url });
    expect(m.code, m.stderr).toBe(0);
    const a = await runCli(['migrate'], { DATABASE_URL: url, DBOS_APPLICATION_NAME: app });
    expect(a.code, a.stderr).toBe(0);
    const sql = new pg.Pool({ connectionString: url, max: 2 });
    sql.on('error', () => undefined);
    return { url, sql };
  }

  /** `exactEnv`: the worker gets `env` alone, not this process's environment with `env` over it. */
  function startWorker(dir: string, env: Record<string, string>, script = 'worker.js', exactEnv = false): Promise<Worker> {
    const child = spawn(process.execPath, [script], {
      cwd: dir,
      env: exactEnv ? env : { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    child.stdout.on('data', (b: Buffer) => output.push(b.toString()));
    child.stderr.on('data', (b: Buffer) => output.push(b.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const w = { child, output, exited };
    workers.push(w);
    return waitFor(
      `worker ${env.DBOS__VMID} ready`,
      async () => {
        if (child.exitCode !== null) throw new Error(`worker ${env.DBOS__VMID} exited ${child.exitCode}:\n${output.join('')}`);
        return output.join('').includes('"worker_ready"') ? w : undefined;
      },
      { timeoutMs: 45_000, intervalMs: 50 },
    );
  }

  async function statuses(sql: pg.Pool, ids: string[]): Promise<{ status: string; executor_id: string | null }[]> {
    return (
      await sql.query<{ status: string; executor_id: string | null }>(
        `SELECT status, executor_id FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`,
        [ids],
      )
    ).rows;
  }

  async function produce(dir: string, env: Record<string, string>, count: number, prefix: string, stepMs: number): Promise<string[]> {
    const p = await run(process.execPath, ['producer.js', String(count), prefix, '3', String(stepMs)], dir, env);
    expect(p.code, p.stderr).toBe(0);
    return (JSON.parse(p.stdout.trim().split('\n').pop() ?? '{}') as { ids: string[] }).ids;
  }

  for (const kind of ['cjs', 'esm'] as const) {
    for (const sdk of SDK_VERSIONS) {
      it(`${kind} app, DBOS ${sdk}: one SDK copy; attach; SIGKILL recovered by the served reaper; SIGTERM drains`, async () => {
        const dir = appDir(`${kind}-${sdk}`);
        const app = uniqueName(`pkg-${kind}`);
        const { url, sql } = await freshDatabase(dir, app);
        const rt = testRuntime({ databaseUrl: url, applicationName: app, env: FAST_REAPER_ENV });
        useRuntime(rt);
        const reaper = await serve('reaper');
        try {
          const env = {
            DBOS_SYSTEM_DATABASE_URL: url,
            APP_NAME: app,
            DBOS__APPVERSION: 'v1',
            REDIS_URL: TEST_REDIS_URL,
            HEARTBEAT_TTL_MS: '3000',
            AFTERLIFE_PUBLISH: 'none',
          };
          const a = await startWorker(dir, { ...env, DBOS__VMID: `${kind}-a` });
          const b = await startWorker(dir, { ...env, DBOS__VMID: `${kind}-b` });
          for (const w of [a, b]) expect(w.output.join('')).toMatch(/"databaseUrlFrom":"dbos-config".*"message":"executor kit attached"/);
          // What the docs tell a user to check: both alive, their liveness locks held.
          const st = parseJson(
            await runCli(['status', '--json'], { DATABASE_URL: url, DBOS_APPLICATION_NAME: app, REDIS_URL: TEST_REDIS_URL }),
            StatusOutput,
          );
          for (const id of [`${kind}-a`, `${kind}-b`])
            expect(st.executors.find((e) => e.executorId === id)).toMatchObject({ state: 'alive', livenessLock: 'held' });

          const ids = await produce(dir, env, 6, `${kind}-${sdk}-k`, 700);
          await waitFor(
            'a checkpoint of a workflow on worker A',
            async () => {
              const r = await sql.query(
                `SELECT 1 FROM dbos.operation_outputs o JOIN dbos.workflow_status w USING (workflow_uuid) WHERE w.executor_id = $1 AND w.status = 'PENDING' LIMIT 1`,
                [`${kind}-a`],
              );
              return r.rowCount === 1;
            },
            { timeoutMs: 20_000, intervalMs: 50 },
          );
          a.child.kill('SIGKILL');
          await a.exited;
          // Cloud Scheduler's part: the served reaper, invoked again until A's work is done elsewhere.
          await waitFor(
            'every workflow SUCCESS after the served reaper recovered worker A',
            async () => {
              const res = await fetch(reaper.url, {
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: JSON.stringify({ maxTicks: 1 }),
              });
              expect(res.status).toBe(200);
              const rows = await statuses(sql, ids);
              return rows.length === ids.length && rows.every((r) => r.status === 'SUCCESS') ? true : undefined;
            },
            { timeoutMs: 60_000, intervalMs: 200 },
          );
          const recovered = await sql.query(
            `SELECT reenqueued FROM afterlife.recoveries WHERE executor_id = $1 AND outcome = 'completed'`,
            [`${kind}-a`],
          );
          expect(recovered.rows.reduce((n, r: { reenqueued: number }) => n + r.reenqueued, 0)).toBeGreaterThan(0);
          expect((await statuses(sql, ids)).every((r) => r.executor_id === `${kind}-b`)).toBe(true);

          const more = await produce(dir, env, 3, `${kind}-${sdk}-t`, 700);
          await waitFor('worker B runs the new workflows', async () => (await statuses(sql, more)).every((r) => r.status === 'PENDING'), {
            timeoutMs: 20_000,
            intervalMs: 50,
          });
          const t0 = Date.now();
          b.child.kill('SIGTERM');
          expect(await b.exited).toBe(0);
          expect(Date.now() - t0).toBeLessThan(8_000);
          expect(b.output.join('')).toMatch(/nothing left PENDING: no death notice needed/);
          expect((await statuses(sql, more)).map((r) => r.status)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS']);
        } finally {
          await reaper.close();
          await rt.close();
          await sql.end();
        }
      }, 150_000);
    }
  }

  it('installed from the directory (a symlink to the checkout): attach uses the app’s DBOS, not the checkout’s', async () => {
    const dir = appDir('link');
    const app = uniqueName('pkg-link');
    const { url, sql } = await freshDatabase(dir, app);
    try {
      const w = await startWorker(dir, {
        DBOS_SYSTEM_DATABASE_URL: url,
        APP_NAME: app,
        DBOS__VMID: 'link-a',
        REDIS_URL: TEST_REDIS_URL,
        AFTERLIFE_PUBLISH: 'none',
      });
      expect(w.output.join('')).toMatch(/executor kit attached/);
      const r = await sql.query(`SELECT state FROM afterlife.executors WHERE executor_id = 'link-a'`);
      expect(r.rows).toEqual([{ state: 'alive' }]);
      w.child.kill('SIGTERM');
      expect(await w.exited).toBe(0);
    } finally {
      await sql.end();
    }
  }, 120_000);

  it('TypeScript apps on DBOS 5.3.0, CommonJS (node16) and ESM (nodenext): the static imports (the kit and its repair entry) compile, and the kit attaches with DBOS’s configuration only', async () => {
    const dir = appDir('cjs-5.3.0');
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const apps = { 'ts-cjs': TS_CJS_WORKER, 'ts-esm': TS_ESM_WORKER };
    for (const [name, text] of Object.entries(apps)) {
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, 'worker.ts'), text);
    }
    writeFileSync(join(dir, 'ts-esm/package.json'), JSON.stringify({ type: 'module' }));
    // What runs: node16 for CommonJS (DBOS's templates), nodenext for ESM. CommonJS also compiles under
    // `commonjs` (node10 resolution: main and types) and `nodenext`.
    const configs: Array<[string, string, string, string | undefined]> = [
      ['ts-cjs', 'node16', 'node16', 'dist'],
      ['ts-cjs', 'commonjs', 'node10', undefined],
      ['ts-cjs', 'nodenext', 'nodenext', undefined],
      ['ts-esm', 'nodenext', 'nodenext', 'dist'],
    ];
    await Promise.all(
      configs.map(async ([app, module, resolution, outDir]) => {
        const file = `tsconfig.${module}.json`;
        writeFileSync(join(dir, app, file), tsconfig(module, resolution, outDir));
        const r = await run(process.execPath, [tsc, '-p', file], join(dir, app));
        expect(r.code, `tsc ${app} (module ${module}):\n${r.stdout}${r.stderr}`).toBe(0);
      }),
    );

    // FAKE: the metadata server Cloud Run gives every container (project ID, token), which cannot run here;
    // the kit finds its project there, as on Cloud Run, so the workers need no variable of the kit's.
    const metadata = createServer((req, res) => {
      if (req.headers['metadata-flavor'] !== 'Google') return void res.writeHead(403).end();
      res.setHeader('Metadata-Flavor', 'Google');
      if (req.url === '/computeMetadata/v1/project/project-id') return void res.end('afterlife-test');
      if (req.url === '/computeMetadata/v1/instance/service-accounts/default/token')
        return void res.setHeader('content-type', 'application/json').end(JSON.stringify({ access_token: 't', expires_in: 3599 }));
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => metadata.listen(0, '127.0.0.1', r));
    const app = uniqueName('pkg-ts');
    const { url, sql } = await freshDatabase(dir, app);
    try {
      const platform = { GCE_METADATA_HOST: `127.0.0.1:${(metadata.address() as AddressInfo).port}` };
      // Only what DBOS itself reads (and this app hands DBOS.setConfig): no REDIS_URL, no AFTERLIFE_*.
      const clean = Object.fromEntries(
        Object.entries(process.env).filter(
          ([k]) => !/^(REDIS_|AFTERLIFE_|HEARTBEAT_|LIVENESS_|PUBSUB_|GOOGLE_CLOUD_PROJECT|GCLOUD_PROJECT|DATABASE_URL)/.test(k),
        ),
      ) as Record<string, string>;
      for (const [name, build] of [
        ['ts-cjs', /[\\/]dist[\\/]commonjs[\\/]runtime[\\/]index\.js/],
        ['ts-esm', /\/dist\/esm\/runtime\/index\.js/],
      ] as const) {
        const w = await startWorker(
          dir,
          { ...clean, ...platform, DBOS_SYSTEM_DATABASE_URL: url, APP_NAME: app, DBOS__VMID: `${name}-a` },
          join(name, 'dist/worker.js'),
          true,
        );
        const out = w.output.join('');
        expect(out).toMatch(/"databaseUrlFrom":"dbos-config".*"message":"executor kit attached"/);
        const ready = JSON.parse(out.split('\n').find((l) => l.includes('"worker_ready"')) ?? '{}') as { build?: string; repair?: string };
        expect(ready.repair, 'afterlife-executor/repair imports beside the kit').toBe('function');
        expect(ready.build, `${name} loaded the kit's ${name === 'ts-cjs' ? 'CommonJS' : 'ES module'} build`).toMatch(build);
        await waitFor(`${name} registered alive`, async () => {
          const r = await sql.query(`SELECT state FROM afterlife.executors WHERE application_name = $1 AND executor_id = $2`, [
            app,
            `${name}-a`,
          ]);
          return r.rows[0]?.state === 'alive';
        });
        w.child.kill('SIGTERM');
        expect(await w.exited, w.output.join('')).toBe(0);
      }
    } finally {
      await sql.end();
      await new Promise((r) => metadata.close(r));
    }
  }, 180_000);
});
