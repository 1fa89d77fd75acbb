/******************************************
  afterlife on Google Cloud: shared locals, APIs and the project
  Files by concern: pubsub.tf, functions.tf, scheduler.tf, iam.tf, redis.tf, network.tf, secrets.tf, logging.tf,
  monitoring.tf (alerts, dashboard.json)
 *****************************************/

locals {
  labels = merge({ app = "afterlife", "afterlife-app" = substr(lower(replace(var.afterlife.dbos_application_name, "/[^a-zA-Z0-9_-]/", "-")), 0, 63) }, var.labels)

  # Cloud SQL's IAM is project-level (no per-instance policy), and the instance may live in another project.
  sql_project  = split(":", var.cloud_sql.instance_connection_name)[0]
  sql_instance = split(":", var.cloud_sql.instance_connection_name)[2]
  iam_db_auth  = var.cloud_sql.password_secret == null

  # The Postgres user of an IAM-authenticated service account is its email without ".gserviceaccount.com".
  db_users = {
    for key, sa in google_service_account.runtime :
    key => local.iam_db_auth ? trimsuffix(sa.email, ".gserviceaccount.com") : var.cloud_sql.user
  }

  /******************************************
    The environment contract of shared/config/index.ts. Every key here is a variable loadConfig reads;
    test/infra/terraform.test.ts checks that, and that each function gets every variable it requires.
   *****************************************/
  common_env = {
    DBOS_APPLICATION_NAME    = var.afterlife.dbos_application_name
    DBOS_SYSTEM_SCHEMA       = var.afterlife.dbos_system_schema
    AFTERLIFE_SCHEMA         = var.afterlife.afterlife_schema
    INSTANCE_CONNECTION_NAME = var.cloud_sql.instance_connection_name
    DB_NAME                  = var.cloud_sql.database
    DB_IP_TYPE               = var.cloud_sql.ip_type
    DB_POOL_MAX              = tostring(var.afterlife.db_pool_max)
    DB_CONNECT_TIMEOUT_MS    = tostring(var.afterlife.db_connect_timeout_ms)
    DB_STATEMENT_TIMEOUT_MS  = tostring(var.afterlife.db_statement_timeout_ms)
    REDIS_KEY_PREFIX         = var.afterlife.redis_key_prefix
    GOOGLE_CLOUD_PROJECT     = var.project_id
    EXECUTOR_DEATH_TOPIC     = google_pubsub_topic.executor_deaths.name
    DEAD_LETTER_TOPIC        = google_pubsub_topic.workflow_dead_letters.name
    HEARTBEAT_TTL_MS         = tostring(var.afterlife.heartbeat_ttl_ms)
    HEARTBEAT_INTERVAL_MS    = tostring(var.afterlife.heartbeat_interval_ms)
    BUDGET_MARGIN_MS         = tostring(var.afterlife.budget_margin_ms)
    RECOVERY_BATCH_SIZE      = tostring(var.afterlife.recovery_batch_size)
    LOCK_TTL_MS              = tostring(var.afterlife.lock_ttl_ms)
    ORPHANED_VERSION_POLICY  = var.afterlife.orphaned_version_policy
    MAX_REPAIRS              = tostring(var.afterlife.max_forks)
    FORK_TARGET_VERSION      = var.afterlife.fork_target_version
    REPAIR_MODE              = var.afterlife.repair_mode
    DATASOURCE_SCHEMAS       = var.afterlife.datasource_schemas
    DBOS_SCHEMA_MAX_VERSION  = tostring(var.afterlife.dbos_schema_max_version)
    LOG_LEVEL                = var.afterlife.log_level
  }

  function_env = {
    executor_death = {
      DB_USER = local.db_users.executor_death
    }
    reaper = {
      DB_USER                     = local.db_users.reaper
      REAPER_TICK_MS              = tostring(var.afterlife.reaper_tick_ms)
      STUCK_AFTER_MS              = tostring(var.afterlife.stuck_after_ms)
      STUCK_POLICY                = var.afterlife.stuck_policy
      UNKNOWN_EXECUTOR_GRACE_MS   = tostring(var.afterlife.unknown_executor_grace_ms)
      ORPHANED_VERSION_GRACE_MS   = tostring(var.afterlife.orphaned_version_grace_ms)
      REAPER_LEASE_MS             = tostring(var.afterlife.reaper_lease_ms)
      REAPER_DIVERGED_LOOKBACK_MS = tostring(var.afterlife.reaper_diverged_lookback_ms)
      REAPER_SESSION_EVIDENCE     = var.afterlife.reaper_session_evidence
      REAPER_RECOVERY             = var.afterlife.reaper_recovery
      REAPER_LIVENESS_EVIDENCE    = var.afterlife.reaper_liveness_evidence
      REAPER_LIVENESS_SETTLE_MS   = tostring(var.afterlife.reaper_liveness_settle_ms)
      # Retention and the global timeout run in the reaper's ticks (docs/retention.md); 0 = off.
      RETENTION_MAX_COMPLETED    = tostring(var.afterlife.retention_max_completed)
      RETENTION_MAX_AGE_MS       = tostring(var.afterlife.retention_max_age_ms)
      WORKFLOW_GLOBAL_TIMEOUT_MS = tostring(var.afterlife.workflow_global_timeout_ms)
      # The floors of the thresholds above (and STUCK_AFTER_MS's): "" = every floor holds.
      AFTERLIFE_ALLOW_BELOW_FLOOR = var.afterlife.allow_below_floor
    }
    drain = {
      DB_USER = local.db_users.drain
      # The budget of a drain request that names none.
      DRAIN_BUDGET_MS = tostring(var.afterlife.drain_budget_ms)
    }
  }

  function_defaults = {
    # Recovering a large backlog runs batch after batch within the budget; redelivery finishes the rest.
    # One warm instance by default: the first notice after a quiet spell would otherwise wait for a cold
    # start (Node, the runtime, a database connection) while the dead executor's work sits PENDING. It is
    # billed as an idle instance around the clock; functions.executor_death.min_instances = 0 saves that.
    executor_death = { timeout_seconds = 300, min_instances = 1, max_instances = 10, ingress_settings = "ALLOW_INTERNAL_ONLY" }
    # One invocation ticks every REAPER_TICK_MS until its budget ends; Scheduler starts the next a minute
    # later, which waits for the lease as a standby. 150 s > two schedule periods, so a standby is always
    # there: no hole between invocations, and a dead holder is replaced within REAPER_LEASE_MS. The cost:
    # about 2.5 invocations alive at any time (150 s per 60 s), up to 3 at once.
    reaper = { timeout_seconds = 150, max_instances = 4, ingress_settings = "ALLOW_INTERNAL_ONLY" }
    # Called by deployers (CI) from outside the VPC; IAM still decides who may call it.
    drain = { timeout_seconds = 540, max_instances = 2, ingress_settings = "ALLOW_ALL" }
  }
  function_settings = {
    for key, defaults in local.function_defaults :
    key => merge(defaults, { for field, value in try(var.functions[key], {}) : field => value if value != null })
  }

  # Secrets reach the code as environment variables resolved by Cloud Run at instance start.
  # (A filtered for-expression, not `cond ? {...} : {}`: object literals of different shapes are
  # inconsistent conditional types in Terraform.)
  secret_env = {
    for key, secret in {
      REDIS_URL     = var.redis.enabled ? google_secret_manager_secret.redis_url[0].secret_id : null
      REDIS_CA_CERT = local.redis_tls ? google_secret_manager_secret.redis_ca[0].secret_id : null
      DB_PASSWORD   = var.cloud_sql.password_secret
    } : key => { secret = secret } if secret != null
  }

  vpc = {
    network    = local.network_id
    subnetwork = local.subnetwork_id
    egress     = var.network.egress
  }
}

data "google_project" "this" {
  project_id = var.project_id
}

locals {
  # Pub/Sub's service agent forwards dead letters and mints the OIDC tokens of push deliveries.
  pubsub_service_agent = "service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

resource "google_project_service" "this" {
  for_each = var.enable_apis ? toset([
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com",
    "compute.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "redis.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "sqladmin.googleapis.com",
    "storage.googleapis.com",
  ]) : toset([])

  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}
