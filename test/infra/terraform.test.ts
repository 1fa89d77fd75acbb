import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse } from '@cdktn/hcl2json';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReaperRequest } from '../../functions/reaper/handle.js';
import {
  type CheckResult,
  checkInfra,
  CONTRACT_TARGETS,
  loggedEvents,
  pendingTargets,
  registeredTargets,
  TERRAFORM,
  terraformFmt,
} from './check.js';
import { IDLE_EVENTS } from '../../shared/reaper/tickLog.js';

/**
 * infra/ checked offline (no provider, no registry here): parse, references, the code's contracts, and
 * `terraform fmt`. The planted breaks prove each check can fail: a copy of infra/ is edited in one place
 * and the problem must be reported.
 */

const repoRoot = resolve(import.meta.dirname, '..', '..');
const infra = join(repoRoot, 'infra');
const fmtAvailable = await import('node:fs').then((fs) => fs.existsSync(TERRAFORM));

let registered: Set<string>;
let pending: Set<string>;
let events: Set<string>;
let real: CheckResult;

beforeAll(async () => {
  registered = await registeredTargets(repoRoot, CONTRACT_TARGETS);
  pending = pendingTargets(repoRoot, registered);
  events = await loggedEvents(repoRoot);
  real = await checkInfra(infra, { registeredTargets: registered, pendingTargets: pending, loggedEvents: events, idleEvents: new Set(IDLE_EVENTS) });
  for (const w of real.warnings) console.warn(`\n!!! ${w}: that entry point is NOT checked against the code yet`);
}, 60_000);

describe('infra/ as committed', () => {
  it('has no problems', () => {
    expect(real.problems).toEqual([]);
  });

  it('deploys the three contract targets, and only targets the code registers or has yet to land', () => {
    expect(real.functions.map((f) => f.entryPoint).sort()).toEqual([...CONTRACT_TARGETS].sort());
    expect(registered.has('executorDeath')).toBe(true);
    for (const f of real.functions) expect(registered.has(f.entryPoint ?? '') || pending.has(f.entryPoint ?? '')).toBe(true);
  });

  it('gives every function the database, app name, timeout and Redis it needs', () => {
    for (const f of real.functions) {
      expect(f.env).toEqual(expect.arrayContaining(['DBOS_APPLICATION_NAME', 'INSTANCE_CONNECTION_NAME', 'DB_USER', 'DB_NAME', 'FUNCTION_TIMEOUT_S', 'REDIS_URL', 'REDIS_CA_CERT', 'DB_PASSWORD']));
    }
  });

  it('grants roles/pubsub.publisher only to the functions that publish on that topic', async () => {
    const iam = (await parse('iam.tf', await readFile(join(infra, 'iam.tf'), 'utf8'))) as { locals?: Array<Record<string, unknown>> };
    const publishers = iam.locals?.find((l) => 'publishers' in l)?.publishers as Record<string, Record<string, string>> | undefined;
    const grants = Object.fromEntries(Object.entries(publishers ?? {}).map(([topic, who]) => [topic, Object.keys(who).sort()]));
    // The reaper publishes death notices; reaper and executorDeath (through shared/repair) dead letters.
    expect(grants).toEqual({ executor_deaths: ['reaper'], workflow_dead_letters: ['executor_death', 'reaper'] });
    // drain has no grant because its code publishes nothing: if it ever does, the grant must come back.
    for (const dir of ['functions/drain', 'shared/drain']) {
      for (const name of await readdir(join(repoRoot, dir))) {
        if (!name.endsWith('.ts')) continue;
        expect(await readFile(join(repoRoot, dir, name), 'utf8'), `${dir}/${name}`).not.toMatch(/\bpublish[A-Z(]/);
      }
    }
  });

  it('counts every event the code logs', () => {
    expect([...events]).toEqual(expect.arrayContaining(['recovery', 'poison_message', 'recovery_retry', 'orphaned_version']));
  });

  it.skipIf(!fmtAvailable)('is terraform fmt clean', async () => {
    expect(await terraformFmt(infra)).toEqual([]);
  });
  if (!fmtAvailable) console.warn(`\n!!! ${TERRAFORM} not found: the terraform fmt check is SKIPPED`);
});

describe('the Scheduler job and the reaper agree', () => {
  it('the body Terraform sends is a request the reaper accepts', async () => {
    const tf = await readFile(join(infra, 'scheduler.tf'), 'utf8');
    const hcl = /body\s*=\s*base64encode\(jsonencode\((\{[^}]*\})\)\)/.exec(tf)?.[1];
    expect(hcl, 'scheduler.tf: body = base64encode(jsonencode({...}))').toBeDefined();
    // HCL object of literals → JSON: `key = "v"`, `key = true`, `key = 3`.
    const json = (hcl ?? '{}').replace(/(\w+)\s*=/g, '"$1":').replace(/\n/g, ',').replace(/,\s*([}])/g, '$1').replace(/\{\s*,/, '{');
    const parsed = ReaperRequest.safeParse(JSON.parse(json));
    expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
  });
});

describe('planted breaks are reported', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'afterlife-infra-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Copies infra/, replaces one exact snippet (which must exist), and checks the copy. */
  async function plant(file: string, from: string, to: string, opts: { events?: Set<string>; idle?: Set<string> } = {}): Promise<CheckResult & { root: string }> {
    const root = await mkdtemp(join(dir, 'plant-'));
    await cp(infra, root, { recursive: true });
    const path = join(root, file);
    const text = await readFile(path, 'utf8');
    expect(text, `snippet to plant in ${file}`).toContain(from);
    await writeFile(path, text.replace(from, to));
    const result = await checkInfra(root, {
      registeredTargets: new Set(CONTRACT_TARGETS),
      loggedEvents: opts.events ?? events,
      idleEvents: opts.idle ?? new Set(IDLE_EVENTS),
    });
    return { ...result, root };
  }
  const messages = (r: CheckResult) => r.problems.map((p) => `${p.file}: ${p.where}: ${p.message}`);

  it('a reference to an undeclared resource', async () => {
    const r = await plant('pubsub.tf', '  topic   = google_pubsub_topic.executor_deaths.id', '  topic   = google_pubsub_topic.executor_deathz.id');
    expect(messages(r)).toEqual([expect.stringMatching(/pubsub\.tf: resource google_pubsub_subscription\.executor_death_push\.topic: reference google_pubsub_topic\.executor_deathz\.id resolves to nothing/)]);
  });

  it('a reference to an undeclared local, variable and module output', async () => {
    const r = await plant('scheduler.tf', 'uri         = module.reaper.uri', 'uri         = module.reaper.url');
    expect(messages(r)).toEqual([expect.stringMatching(/reference module\.reaper\.url resolves to nothing/)]);
    const v = await plant('redis.tf', 'memory_size_gb     = var.redis.memory_size_gb', 'memory_size_gb     = var.rediss.memory_size_gb');
    expect(messages(v)).toEqual([expect.stringMatching(/reference var\.rediss\.memory_size_gb resolves to nothing/)]);
  });

  it('a syntax error', async () => {
    const r = await plant('pubsub.tf', 'resource "google_pubsub_topic" "executor_deaths" {', 'resource "google_pubsub_topic" "executor_deaths" {\n  name = ');
    expect(messages(r).join('\n')).toMatch(/pubsub\.tf: \(parse\)/);
  });

  it('an entry point the code does not register', async () => {
    const r = await plant('functions.tf', 'entry_point                  = "executorDeath"', 'entry_point                  = "executorDeth"');
    expect(messages(r)).toContainEqual(expect.stringMatching(/module\.executor_death: entry_point executorDeth is not a target/));
  });

  it('a function without a variable loadConfig requires, or with one it does not read', async () => {
    const r = await plant('main.tf', '    DBOS_APPLICATION_NAME    = var.afterlife.dbos_application_name\n', '');
    expect(messages(r).filter((m) => /module\.\w+: environment: DBOS_APPLICATION_NAME/.test(m))).toHaveLength(3);
    expect(messages(r)).toContainEqual(expect.stringMatching(/DBOS_APPLICATION_NAME \(shared\/config\) cannot be set from Terraform/));
    const u = await plant('main.tf', '      DB_USER = local.db_users.drain\n', '');
    expect(messages(u)).toEqual([expect.stringMatching(/module\.drain: environment: DB_USER: is required with INSTANCE_CONNECTION_NAME/)]);
    const t = await plant('main.tf', '      DB_USER                     = local.db_users.reaper\n', '      DB_USER                     = local.db_users.reaper\n      HEARTBEAT_TTL               = "5000"\n');
    expect(messages(t)).toEqual([expect.stringMatching(/module\.reaper: environment: sets HEARTBEAT_TTL, which shared\/config does not read/)]);
    const l = await plant('main.tf', '    DB_IP_TYPE               = var.cloud_sql.ip_type', '    DB_IP_TYPE               = "PRIVAT"');
    expect(messages(l)).toContainEqual(expect.stringMatching(/environment: DB_IP_TYPE: Invalid option/));
  });

  it('a config variable Terraform cannot set, or a default that differs from the code', async () => {
    const r = await plant('main.tf', '      DRAIN_BUDGET_MS = tostring(var.afterlife.drain_budget_ms)\n', '');
    expect(messages(r)).toEqual([
      expect.stringMatching(/module\.drain: environment: DRAIN_BUDGET_MS is not set/),
      expect.stringMatching(/DRAIN_BUDGET_MS \(shared\/config\) cannot be set from Terraform/),
    ]);
    const d = await plant('variables.tf', 'reaper_diverged_lookback_ms = optional(number, 3600000)', 'reaper_diverged_lookback_ms = optional(number, 600000)');
    expect(messages(d)).toEqual([
      expect.stringMatching(/variable afterlife\.reaper_diverged_lookback_ms: defaults to 600000, but shared\/config defaults REAPER_DIVERGED_LOOKBACK_MS to 3600000/),
    ]);
  });

  it('the reaper\'s database user not granted pg_read_all_stats', async () => {
    const r = await plant('iam.tf', 'GRANT pg_read_all_stats TO "${local.db_users.reaper}";', 'GRANT pg_read_all_settings TO "${local.db_users.reaper}";');
    expect(messages(r)).toEqual([
      expect.stringMatching(/module reaper: no google_sql_provision_script grants pg_read_all_stats to local\.db_users\.reaper/),
      expect.stringMatching(/module reaper: no output carries the pg_read_all_stats grant/),
    ]);
    const d = await plant('iam.tf', '  database    = var.cloud_sql.database\n', '');
    expect(messages(d)).toEqual([expect.stringMatching(/resource google_sql_provision_script\.admin_grants: has no database/)]);
  });

  it('an enum setting without a validation, or one that allows what the code rejects', async () => {
    const r = await plant('variables.tf', 'contains(["DEBUG", "INFO", "NOTICE", "WARNING", "ERROR"], var.afterlife.log_level)', 'true');
    expect(messages(r)).toEqual([expect.stringMatching(/variable afterlife\.log_level: has no contains\(\[\.\.\.\]\) validation/)]);
    const w = await plant('variables.tf', '"NOTICE", "WARNING", "ERROR"], var.afterlife.log_level', '"NOTICE", "WARN", "ERROR"], var.afterlife.log_level');
    expect(messages(w)).toEqual([expect.stringMatching(/variable afterlife\.log_level: its validation allows "WARN", which shared\/config rejects for LOG_LEVEL/)]);
  });

  it('FUNCTION_TIMEOUT_S not taken from the timeout', async () => {
    const r = await plant('modules/function/main.tf', 'FUNCTION_TIMEOUT_S = tostring(var.service.timeout_seconds)', 'FUNCTION_TIMEOUT_S = "60"');
    expect(messages(r)).toHaveLength(3);
    expect(messages(r)[0]).toMatch(/FUNCTION_TIMEOUT_S is not derived from service_config\.timeout_seconds/);
  });

  it('a runtime other than nodejs24', async () => {
    const r = await plant('modules/function/variables.tf', 'default     = "nodejs24"', 'default     = "nodejs22"');
    expect(messages(r)).toHaveLength(3);
    expect(messages(r)[0]).toMatch(/runtime is "nodejs22"/);
  });

  it('a push subscription without dead-lettering, backoff, OIDC, the topic path or a long enough deadline', async () => {
    const text = await readFile(join(infra, 'pubsub.tf'), 'utf8');
    const dlp = /^ {2}dead_letter_policy \{\n[\s\S]*?^ {2}\}\n/m.exec(text)?.[0] ?? 'dead_letter_policy block';
    const d = await plant('pubsub.tf', dlp, '');
    expect(messages(d)).toEqual([expect.stringMatching(/google_pubsub_subscription\.executor_death_push: has no dead_letter_policy/)]);
    const retry = /^ {2}retry_policy \{\n[\s\S]*?^ {2}\}\n/m.exec(text)?.[0] ?? 'retry_policy block';
    const b = await plant('pubsub.tf', retry, '');
    expect(messages(b)).toEqual([expect.stringMatching(/executor_death_push: has no retry_policy/)]);
    const oidc = /^ {4}oidc_token \{\n[\s\S]*?^ {4}\}\n/m.exec(text)?.[0] ?? 'oidc_token block';
    const o = await plant('pubsub.tf', oidc, '');
    expect(messages(o)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/executor_death_push: push_config has no oidc_token/),
        expect.stringMatching(/module\.executor_death: run\.invoker granted to google_service_account\.trigger, which is neither its trigger's nor its scheduler's account/),
      ]),
    );
    const p = await plant('pubsub.tf', '/projects/${var.project_id}/topics/${google_pubsub_topic.executor_deaths.name}"', '"');
    expect(messages(p)).toEqual([expect.stringMatching(/push_endpoint .* does not end in \/projects\/<project>\/topics\/<topic>/)]);
    const a = await plant('pubsub.tf', 'ack_deadline_seconds       = min(local.function_settings.executor_death.timeout_seconds + 30, 600)', 'ack_deadline_seconds       = 60');
    expect(messages(a)).toEqual([expect.stringMatching(/ack_deadline_seconds 60 is not min\(<function timeout> \+ slack, 600\)/)]);
    const whole = /^resource "google_pubsub_subscription" "executor_death_push" \{\n[\s\S]*?^\}\n/m.exec(text)?.[0] ?? 'push subscription';
    const none = await plant('pubsub.tf', whole, '');
    expect(messages(none)).toContainEqual(expect.stringMatching(/module\.executor_death: executorDeath has no Pub\/Sub delivery/));
  });

  it('a local-exec provisioner', async () => {
    const r = await plant('pubsub.tf', '# ...and publishes it on the dead-letter topic.', 'resource "terraform_data" "patch" {\n  provisioner "local-exec" {\n    command = "gcloud pubsub subscriptions update x"\n  }\n}\n\n# ...and publishes it on the dead-letter topic.');
    expect(messages(r)).toEqual([expect.stringMatching(/resource terraform_data\.patch: has a provisioner \(local-exec\)/)]);
  });

  it('a Scheduler job that retries, or has no OIDC token', async () => {
    const r = await plant('scheduler.tf', 'retry_count = 0', 'retry_count = 3');
    expect(messages(r)).toEqual([expect.stringMatching(/google_cloud_scheduler_job\.reaper: retry_config\.retry_count is 3/)]);
    const d = await plant('scheduler.tf', 'min(local.function_settings.reaper.timeout_seconds + 30, 1800)', 'local.function_settings.reaper.timeout_seconds + 30');
    expect(messages(d)).toEqual([expect.stringMatching(/attempt_deadline .* is not clamped to Scheduler's 1800 s maximum/)]);
    const o = await plant('scheduler.tf', 'oidc_token {', 'oauth_token {');
    expect(messages(o)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/http_target has no oidc_token/),
        expect.stringMatching(/no Cloud Scheduler job with OIDC calls the reaper/),
      ]),
    );
  });

  it('run.invoker for anyone but the callers, and public functions', async () => {
    const r = await plant('functions.tf', 'scheduler = "serviceAccount:${google_service_account.scheduler.email}"', 'scheduler = "serviceAccount:${google_service_account.trigger.email}"');
    expect(messages(r)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/module\.reaper: run\.invoker granted to google_service_account\.trigger/),
        expect.stringMatching(/module\.reaper: its caller google_service_account\.scheduler is not granted run\.invoker/),
      ]),
    );
    const p = await plant('functions.tf', 'invokers = var.drain_invokers', 'invokers = { public = "allUsers" }');
    expect(messages(p)).toContainEqual(expect.stringMatching(/module drain: grants allUsers/));
  });

  it('a source object not named by content hash', async () => {
    const r = await plant('functions.tf', 'name   = "afterlife-${data.archive_file.source.output_md5}.zip"', 'name   = "afterlife-source.zip"');
    expect(messages(r)).toEqual([expect.stringMatching(/not named by the archive's content hash/)]);
  });

  it('an event the code logs that no metric counts', async () => {
    // Checked against the code's events plus the fork engine's, which may not have landed yet.
    const line = /^ {4}fork +=.*\n/m.exec(await readFile(join(infra, 'logging.tf'), 'utf8'))?.[0] ?? 'fork metric line';
    const r = await plant('logging.tf', line, '', { events: new Set([...events, 'fork']) });
    expect(messages(r)).toEqual([
      expect.stringMatching(/the code logs event "fork" but no log-based metric counts it/),
      // The dashboard's forks panel charts it too.
      expect.stringMatching(/dashboard\.json: .*widget charts \$\{metric_prefix\}\/fork, which is not a metric this module creates/),
      expect.stringMatching(/dashboard\.json: \(widgets\): no widget charts fork/),
    ]);
  });

  it('a module argument the module does not declare', async () => {
    const r = await plant('examples/basic/main.tf', 'source_dir = ', 'source_dirr = ');
    expect(messages(r)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/argument source_dirr is not a variable of \./),
        expect.stringMatching(/required variable source_dir of \. is not set/),
      ]),
    );
  });

  it('an alert policy on a metric the module does not create', async () => {
    const r = await plant('monitoring.tf', '${google_logging_metric.event["stuck_workflow"].name}', '${google_logging_metric.event["stuck_workflows"].name}');
    expect(messages(r)).toEqual([
      expect.stringMatching(/google_monitoring_alert_policy\.this\["stuck_workflow"\]: condition metric .*stuck_workflows.* is not a log-based metric this module creates/),
      expect.stringMatching(/alert policies: no threshold alert policy on stuck_workflow/),
    ]);
    const g = await plant('monitoring.tf', 'pubsub.googleapis.com/subscription/num_undelivered_messages', 'pubsub.googleapis.com/subscription/num_undelivered_messagez');
    expect(messages(g)).toEqual([expect.stringMatching(/google_monitoring_alert_policy\.this\["dead_letters"\]: condition metric pubsub\.googleapis\.com\/subscription\/num_undelivered_messagez is neither/)]);
  });

  it('an alert policy without documentation or notification channels', async () => {
    const policies = ['poison_message', 'orphaned_version', 'stuck_workflow', 'unguarded_application', 'repair_refused', 'recovery_retry', 'function_errors', 'dead_letters', 'reaper_not_ticking'];
    const r = await plant('monitoring.tf', '    content   = each.value.content\n', '');
    expect(messages(r)).toHaveLength(policies.length);
    expect(messages(r)).toEqual(expect.arrayContaining(policies.map((p) => expect.stringMatching(new RegExp(`this\\["${p}"\\]: has no documentation`)))));
    // One entry's text gone, the others intact: each entry is checked, not only the resource.
    const text = await readFile(join(infra, 'monitoring.tf'), 'utf8');
    const reaperDoc = /^ {6}content = <<-EOT\n {8}No `reaper_ticks`[\s\S]*?^ {6}EOT\n/m.exec(text)?.[0] ?? 'reaper documentation';
    const e = await plant('monitoring.tf', reaperDoc, '      content = ""\n');
    expect(messages(e)).toEqual([expect.stringMatching(/this\["reaper_not_ticking"\]: has no documentation/)]);
    const n = await plant('monitoring.tf', '  notification_channels = var.alerts.notification_channels\n', '');
    expect(messages(n)).toHaveLength(policies.length);
    expect(messages(n)).toContainEqual(expect.stringMatching(/this\["dead_letters"\]: notification_channels is not var\.alerts\.notification_channels/));
  });

  it('a required alert missing, or the reaper absence alert waiting too long', async () => {
    const text = await readFile(join(infra, 'monitoring.tf'), 'utf8');
    const poison = /^ {4}poison_message = \{\n[\s\S]*?^ {4}\}\n/m.exec(text)?.[0] ?? 'poison block';
    const r = await plant('monitoring.tf', poison, '');
    expect(messages(r)).toEqual([expect.stringMatching(/alert policies: no threshold alert policy on poison_message/)]);
    const a = await plant('variables.tf', 'reaper_absent_seconds  = optional(number, 120)', 'reaper_absent_seconds  = optional(number, 600)');
    expect(messages(a)).toEqual([expect.stringMatching(/the absence alert on reaper_ticks waits 600 s, more than 120 s/)]);
    const t = await plant('monitoring.tf', '    condition_absent {', '    condition_threshold {');
    expect(messages(t)).toContainEqual(expect.stringMatching(/no metric-absence alert policy on reaper_ticks/));
  });

  it('the reaper-not-ticking alert or the reaper panel on a line quiet ticks no longer write', async () => {
    // reaper_tick is written only by ticks that acted or failed: an absence alert on it fires while all is quiet.
    const a = await plant('monitoring.tf', 'google_logging_metric.event["reaper_ticks"].name', 'google_logging_metric.event["reaper_tick"].name');
    expect(messages(a)).toEqual([
      expect.stringMatching(/this\["reaper_not_ticking"\]: the absence alert counts reaper_tick, which an idle reaper does not log/),
      expect.stringMatching(/alert policies: no metric-absence alert policy on reaper_ticks/),
    ]);
    const d = await plant('dashboard.json', '${metric_prefix}/reaper_ticks\\"', '${metric_prefix}/reaper_tick\\"');
    expect(messages(d)).toEqual([expect.stringMatching(/dashboard\.json: \(widgets\): no widget charts reaper_ticks/)]);
    // The code side: were the per-minute summary dropped from what an idle reaper logs, both would break.
    const c = await plant('variables.tf', 'reaper_absent_seconds  = optional(number, 120)', 'reaper_absent_seconds  = optional(number, 120)', { idle: new Set(['reaper_summary']) });
    expect(messages(c)).toEqual([
      expect.stringMatching(/this\["reaper_not_ticking"\]: the absence alert counts reaper_ticks, which an idle reaper does not log/),
      expect.stringMatching(/dashboard\.json: \(widgets\): the reaper panel charts reaper_ticks, which an idle reaper does not log/),
    ]);
  });

  it('a dashboard that is not JSON, or charts a metric the module does not create', async () => {
    const r = await plant('dashboard.json', '"columns": 48,', '"columns": 48,,');
    expect(messages(r)).toEqual([expect.stringMatching(/dashboard\.json: \(json\): not valid JSON/)]);
    const m = await plant('dashboard.json', '${metric_prefix}/executor_dead\\"', '${metric_prefix}/executors_dead\\"');
    expect(messages(m)).toEqual([
      expect.stringMatching(/dashboard\.json: .*widget charts \$\{metric_prefix\}\/executors_dead, which is not a metric this module creates/),
      expect.stringMatching(/dashboard\.json: \(widgets\): no widget charts executor_dead/),
    ]);
    const v = await plant('dashboard.json', '"displayName": "${title}"', '"displayName": "${name}"');
    expect(messages(v)).toEqual([expect.stringMatching(/\$\{name\} is not a variable templatefile passes/)]);
  });

  it('a recovery SLO missing its metrics, SLO, burn-rate windows, defaults or heatmap', async () => {
    const m = await plant('slo.tf', '    value_type  = "DISTRIBUTION"', '    value_type  = "INT64"');
    expect(messages(m)).toEqual([
      expect.stringMatching(/slo\.tf: .*recovery_time\["death_to_reenqueued"\]: is not a DISTRIBUTION of jsonPayload\.deathToReenqueuedMs/),
      expect.stringMatching(/slo\.tf: .*recovery_time\["death_to_first_step"\]: is not a DISTRIBUTION of jsonPayload\.deathToFirstStepMs/),
    ]);
    const s = await plant('slo.tf', '${google_monitoring_slo.recovery[0].name}\\", \\"${each.value.long}', '${google_monitoring_slo.recovering[0].name}\\", \\"${each.value.long}');
    expect(messages(s)).toContainEqual(expect.stringMatching(/burn-rate condition on google_monitoring_slo\.recovering, which this module does not define/));
    const noSlo = await plant('slo.tf', 'google_logging_metric.recovery_time["death_to_first_step"].name', 'google_logging_metric.recovery_time["death_to_reenqueued"].name');
    expect(messages(noSlo)).toEqual([expect.stringMatching(/no google_monitoring_slo whose distribution cut reads the death_to_first_step metric/)]);
    const w = await plant('slo.tf', 'short = "300s"', 'short = "600s"');
    expect(messages(w)).toEqual([expect.stringMatching(/no burn-rate alert policy on google_monitoring_slo\.recovery over 3600s and 300s/)]);
    const d = await plant('variables.tf', 'goal                = optional(number, 0.99)', 'goal                = optional(number, 0.9)');
    expect(messages(d)).toEqual([expect.stringMatching(/goal defaults to 0\.9, not 0\.99/)]);
    const h = await plant('dashboard.json', '"plotType": "HEATMAP"', '"plotType": "LINE"');
    expect(messages(h)).toEqual([expect.stringMatching(/dashboard\.json: no HEATMAP widget of death_to_first_step/)]);
  });

  it('Redis without TLS by default, or the functions without its CA', async () => {
    const r = await plant('variables.tf', 'transit_encryption = optional(bool, true)', 'transit_encryption = optional(bool, false)');
    expect(messages(r)).toEqual([expect.stringMatching(/google_redis_instance\.this: transit_encryption_mode .* not SERVER_AUTHENTICATION by default/)]);
    const c = await plant('main.tf', '      REDIS_CA_CERT = local.redis_tls ? google_secret_manager_secret.redis_ca[0].secret_id : null\n', '');
    expect(messages(c).filter((m) => /environment: REDIS_CA_CERT is not set/.test(m))).toHaveLength(3);
  });

  it('metadata.yaml out of step with the module', async () => {
    const r = await plant('metadata.yaml', '      - name: dashboard\n', '      - name: dashbored\n');
    expect(messages(r)).toEqual([
      expect.stringMatching(/metadata\.yaml: variables: dashboard is in the module but not in metadata\.yaml/),
      expect.stringMatching(/metadata\.yaml: variables: dashbored is listed but not in the module/),
    ]);
    const o = await plant('metadata.yaml', '      - name: reaper_job\n', '');
    expect(messages(o)).toEqual([expect.stringMatching(/outputs: reaper_job is in the module but not in metadata\.yaml/)]);
    const a = await plant('main.tf', '    "monitoring.googleapis.com",\n', '');
    expect(messages(a)).toEqual([expect.stringMatching(/services: monitoring\.googleapis\.com is listed but not in the module/)]);
  });

  it.skipIf(!fmtAvailable)('unformatted HCL fails terraform fmt', async () => {
    const r = await plant('redis.tf', '  tier               = var.redis.tier', '  tier = var.redis.tier');
    expect(await terraformFmt(r.root)).toEqual([expect.objectContaining({ file: 'redis.tf' })]);
  });
});
