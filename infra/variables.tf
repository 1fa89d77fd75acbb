/******************************************
  Where
 *****************************************/

variable "project_id" {
  description = "Project to deploy into."
  type        = string
}

variable "region" {
  description = "Region of the functions, Scheduler job, Redis and subnet."
  type        = string
}

variable "name_prefix" {
  description = "Prefix of every named resource, so two deployments (e.g. two DBOS apps) can share a project."
  type        = string
  default     = "afterlife"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,13}$", var.name_prefix))
    error_message = "name_prefix must be lower-case letters, digits and hyphens, at most 14 characters (service-account IDs are limited to 30)."
  }
}

variable "labels" {
  description = "Labels on every resource that takes them."
  type        = map(string)
  default     = {}
}

variable "enable_apis" {
  description = "Enable the Google APIs the module uses (turn off when the project is managed elsewhere)."
  type        = bool
  default     = true
}

/******************************************
  Code
 *****************************************/

variable "source_dir" {
  description = "Directory holding the deployable package: package.json, package-lock.json and dist/ (see infra/package.sh)."
  type        = string
}

variable "build_service_account" {
  description = <<-EOT
    Service account Cloud Build builds the functions with (projects/<project>/serviceAccounts/<email>).
    Null uses the project's default build account, which new projects restrict; give a dedicated one
    roles/cloudbuild.builds.builder there.
  EOT
  type        = string
  default     = null
}

variable "source_bucket" {
  description = "Bucket for the source archive; created by the module when null."
  type        = string
  default     = null
}

/******************************************
  What afterlife guards, and how (the config of shared/config/index.ts)
 *****************************************/

variable "afterlife" {
  description = <<-EOT
    Configuration passed to every function as the environment variables of shared/config/index.ts.
    Null fields fall back to the code's defaults (docs/configuration.md).
  EOT
  type = object({
    dbos_application_name       = string
    dbos_system_schema          = optional(string, "dbos")
    afterlife_schema            = optional(string, "afterlife")
    redis_key_prefix            = optional(string, "afterlife")
    heartbeat_ttl_ms            = optional(number, 15000)
    heartbeat_interval_ms       = optional(number, 250)
    budget_margin_ms            = optional(number, 5000)
    drain_budget_ms             = optional(number, 600000)
    db_pool_max                 = optional(number, 3)
    db_connect_timeout_ms       = optional(number, 5000)
    db_statement_timeout_ms     = optional(number, 30000)
    recovery_batch_size         = optional(number, 1000)
    lock_ttl_ms                 = optional(number, 30000)
    orphaned_version_policy     = optional(string, "leave")
    reaper_tick_ms              = optional(number, 250)
    stuck_after_ms              = optional(number, 3600000)
    stuck_policy                = optional(string, "report")
    unknown_executor_grace_ms   = optional(number, 600000)
    orphaned_version_grace_ms   = optional(number, 300000)
    reaper_lease_ms             = optional(number, 3000)
    reaper_recovery             = optional(string, "inline")
    reaper_liveness_evidence    = optional(string, "pg_locks")
    reaper_liveness_settle_ms   = optional(number, 10000)
    reaper_diverged_lookback_ms = optional(number, 3600000)
    reaper_session_evidence     = optional(string, "pg_stat_activity")
    max_forks                   = optional(number, 3)
    fork_target_version         = optional(string, "latest")
    repair_mode                 = optional(string, "rewind")
    datasource_schemas          = optional(string, "dbos")
    dbos_schema_max_version     = optional(number, 123)
    # Retention (docs/retention.md): OFF by default (0). Deleting workflow history cannot be undone.
    retention_max_completed    = optional(number, 0)
    retention_max_age_ms       = optional(number, 0)
    workflow_global_timeout_ms = optional(number, 0)
    # Thresholds that cancel or delete have floors (docs/configuration.md#floors); below one, start fails
    # unless this names the variable (comma-separated), e.g. "STUCK_AFTER_MS". Every start then logs a WARNING.
    allow_below_floor = optional(string, "")
    log_level         = optional(string, "INFO")
  })

  validation {
    condition     = contains(["leave", "fork-to-latest"], var.afterlife.orphaned_version_policy)
    error_message = "orphaned_version_policy must be leave or fork-to-latest."
  }
  validation {
    condition     = contains(["report", "cancel-and-fork", "cancel-and-repair"], var.afterlife.stuck_policy)
    error_message = "stuck_policy must be report, cancel-and-fork or cancel-and-repair."
  }
  validation {
    # "none" behind a connection pooler that hides application_name (see docs/reaper.md, "Connection poolers").
    condition     = contains(["pg_stat_activity", "none"], var.afterlife.reaper_session_evidence)
    error_message = "reaper_session_evidence must be pg_stat_activity or none."
  }
  validation {
    condition     = contains(["inline", "notice"], var.afterlife.reaper_recovery)
    error_message = "reaper_recovery must be inline or notice."
  }
  validation {
    # "none" when the kits' liveness connections go through a transaction-mode pooler (no session locks).
    condition     = contains(["pg_locks", "none"], var.afterlife.reaper_liveness_evidence)
    error_message = "reaper_liveness_evidence must be pg_locks or none."
  }
  validation {
    condition     = contains(["latest", "original"], var.afterlife.fork_target_version)
    error_message = "fork_target_version must be latest or original."
  }
  validation {
    condition     = contains(["rewind", "fork"], var.afterlife.repair_mode)
    error_message = "repair_mode must be rewind or fork."
  }
  validation {
    condition     = contains(["DEBUG", "INFO", "NOTICE", "WARNING", "ERROR"], var.afterlife.log_level)
    error_message = "log_level must be DEBUG, INFO, NOTICE, WARNING or ERROR (Cloud Logging severities)."
  }
  # The code's bounds (shared/config): caught at plan rather than as a crash-looping function.
  validation {
    condition     = var.afterlife.drain_budget_ms >= 1000 && var.afterlife.drain_budget_ms <= 86400000
    error_message = "drain_budget_ms must be between 1000 and 86400000 (24 h)."
  }
  validation {
    condition     = alltrue([for v in [var.afterlife.retention_max_completed, var.afterlife.retention_max_age_ms, var.afterlife.workflow_global_timeout_ms] : v >= 0 && floor(v) == v])
    error_message = "retention_max_completed, retention_max_age_ms and workflow_global_timeout_ms must be whole numbers >= 0 (0 = off)."
  }
  validation {
    condition     = var.afterlife.orphaned_version_grace_ms >= 0
    error_message = "orphaned_version_grace_ms must be 0 or more."
  }
  validation {
    condition     = var.afterlife.reaper_diverged_lookback_ms >= 60000
    error_message = "reaper_diverged_lookback_ms must be at least 60000 (a minute)."
  }
  validation {
    condition     = can(regex("^[A-Za-z_][A-Za-z0-9_]{0,62}$", var.afterlife.dbos_system_schema)) && can(regex("^[A-Za-z_][A-Za-z0-9_]{0,62}$", var.afterlife.afterlife_schema))
    error_message = "Schema names must be SQL identifiers."
  }
}

variable "topics" {
  description = "Pub/Sub topic names. The first two are also the EXECUTOR_DEATH_TOPIC and DEAD_LETTER_TOPIC the code reads."
  type = object({
    executor_deaths             = optional(string, "executor-deaths")
    workflow_dead_letters       = optional(string, "workflow-dead-letters")
    executor_deaths_dead_letter = optional(string, "executor-deaths-dead-letter")
    message_retention           = optional(string, "604800s")
  })
  default = {}
}

variable "executor_death_dead_letter" {
  description = <<-EOT
    Redelivery and dead-lettering of death notices on executorDeath's push subscription (pubsub.tf): a
    nacked notice is redelivered with exponential backoff between minimum_backoff and maximum_backoff,
    and after max_delivery_attempts it goes to the dead-letter topic (kept by its -hold subscription).
  EOT
  type = object({
    max_delivery_attempts = optional(number, 10)
    minimum_backoff       = optional(string, "10s")
    maximum_backoff       = optional(string, "600s")
  })
  default = {}

  validation {
    condition     = var.executor_death_dead_letter.max_delivery_attempts >= 5 && var.executor_death_dead_letter.max_delivery_attempts <= 100
    error_message = "Pub/Sub allows 5 to 100 delivery attempts before dead-lettering."
  }
  validation {
    condition     = alltrue([for b in [var.executor_death_dead_letter.minimum_backoff, var.executor_death_dead_letter.maximum_backoff] : can(regex("^[0-9]+s$", b)) && tonumber(trimsuffix(b, "s")) <= 600])
    error_message = "Backoffs are durations in seconds (\"10s\"), at most 600s."
  }
}

/******************************************
  Functions
 *****************************************/

variable "functions" {
  description = <<-EOT
    Per-function scaling, keyed executor_death, reaper, drain. Unset fields keep local.function_defaults
    (main.tf) and then modules/function's defaults. Instances × DB_POOL_MAX bounds afterlife's Postgres
    connections.
  EOT
  type = map(object({
    timeout_seconds  = optional(number)
    memory           = optional(string)
    cpu              = optional(string)
    min_instances    = optional(number)
    max_instances    = optional(number)
    concurrency      = optional(number)
    ingress_settings = optional(string)
  }))
  default = {}

  validation {
    condition     = alltrue([for key in keys(var.functions) : contains(["executor_death", "reaper", "drain"], key)])
    error_message = "functions is keyed executor_death, reaper and drain."
  }
  validation {
    # Cloud Scheduler's attempt deadline is at most 1800 s and covers the reaper's run plus 30 s.
    condition     = try(var.functions.reaper.timeout_seconds, null) == null || try(var.functions.reaper.timeout_seconds <= 1770, false)
    error_message = "functions.reaper.timeout_seconds must be at most 1770: Cloud Scheduler waits at most 1800 s (timeout + 30 s of slack)."
  }
  validation {
    # A push delivery waits at most 600 s (the subscription's ack deadline: timeout + 30 s for a cold start).
    condition     = try(var.functions.executor_death.timeout_seconds, null) == null || try(var.functions.executor_death.timeout_seconds <= 540, false)
    error_message = "functions.executor_death.timeout_seconds must be at most 540: Pub/Sub waits at most 600 s for a push (timeout + 30 s of slack)."
  }
}

variable "drain_invokers" {
  description = "Members allowed to call the drain function, keyed by a static name, e.g. { ci = \"serviceAccount:deployer@p.iam.gserviceaccount.com\" }."
  type        = map(string)
  default     = {}
}

variable "executor_service_accounts" {
  description = <<-EOT
    Service accounts of the DBOS executors running the afterlife kit, keyed by a static name. They get
    roles/pubsub.publisher on the death-notice topic and read access to the Redis URL secret (heartbeats).
  EOT
  type        = map(string)
  default     = {}
}

/******************************************
  Reaper schedule
 *****************************************/

variable "reaper_schedule" {
  description = "Cloud Scheduler job of the reaper. Scheduler never retries: the next tick is the retry."
  type = object({
    schedule  = optional(string, "* * * * *")
    time_zone = optional(string, "Etc/UTC")
    paused    = optional(bool, false)
  })
  default = {}
}

/******************************************
  Network, Redis, Cloud SQL
 *****************************************/

variable "network" {
  description = <<-EOT
    VPC for Direct VPC egress. Use the VPC where Cloud SQL's private IP lives (its private services
    access peering is per network); Memorystore is peered into it. create makes a new VPC (then Cloud SQL
    needs ip_type PUBLIC or its own peering); create_subnetwork makes the functions' subnet in region.
  EOT
  type = object({
    name              = string
    create            = optional(bool, false)
    subnetwork        = string
    create_subnetwork = optional(bool, true)
    subnet_cidr       = optional(string, "10.8.0.0/26")
    egress            = optional(string, "VPC_EGRESS_PRIVATE_RANGES_ONLY")
  })

  validation {
    condition     = contains(["VPC_EGRESS_PRIVATE_RANGES_ONLY", "VPC_EGRESS_ALL_TRAFFIC"], var.network.egress)
    error_message = "egress must be VPC_EGRESS_PRIVATE_RANGES_ONLY or VPC_EGRESS_ALL_TRAFFIC."
  }
}

variable "redis" {
  description = <<-EOT
    Memorystore for Redis. Without it (enabled = false) afterlife runs degraded: recovery still works,
    the reaper declares nothing dead. transit_encryption (default on) is Memorystore's
    SERVER_AUTHENTICATION TLS: REDIS_URL becomes rediss:// and the server CA reaches the functions and
    the executors as REDIS_CA_CERT (secret output redis.ca_secret). Turning it off or on replaces the
    instance.
  EOT
  type = object({
    enabled            = optional(bool, true)
    transit_encryption = optional(bool, true)
    tier               = optional(string, "BASIC")
    memory_size_gb     = optional(number, 1)
    redis_version      = optional(string, "REDIS_7_2")
    connect_mode       = optional(string, "DIRECT_PEERING")
  })
  default = {}

  validation {
    condition     = contains(["BASIC", "STANDARD_HA"], var.redis.tier)
    error_message = "tier must be BASIC or STANDARD_HA."
  }
}

variable "cloud_sql" {
  description = <<-EOT
    The Cloud SQL instance holding DBOS's system database, reached through the Cloud SQL connector.
    With password_secret null each function logs in with IAM database auth as its own service account
    (DB_USER = its email without .gserviceaccount.com); otherwise all use user + the password secret.
  EOT
  type = object({
    instance_connection_name = string
    database                 = string
    ip_type                  = optional(string, "PRIVATE")
    create_iam_users         = optional(bool, true)
    user                     = optional(string)
    password_secret          = optional(string)
  })

  validation {
    condition     = can(regex("^[^:]+:[^:]+:[^:]+$", var.cloud_sql.instance_connection_name))
    error_message = "instance_connection_name must be project:region:instance."
  }
  validation {
    condition     = contains(["PUBLIC", "PRIVATE", "PSC"], var.cloud_sql.ip_type)
    error_message = "ip_type must be PUBLIC, PRIVATE or PSC."
  }
  validation {
    condition     = var.cloud_sql.password_secret == null || var.cloud_sql.user != null
    error_message = "password auth needs cloud_sql.user as well as cloud_sql.password_secret."
  }
}

variable "database_grants" {
  description = <<-EOT
    The one Postgres grant an admin must give: pg_read_all_stats for the reaper's database user, which
    it needs to see executors without the kit in pg_stat_activity. With apply = true Terraform runs it
    through the Cloud SQL Data API (google_sql_provision_script). That needs data_api_access =
    "ALLOW_DATA_API" on the instance, and the identity running terraform must be an IAM database user
    of it that may grant the role (a cloudsqlsuperuser member) with roles/cloudsql.instanceUser. Left
    false, run output database_grants_sql yourself (docs/operations.md, "Deploying to Google Cloud", step 4).
  EOT
  type = object({
    apply = optional(bool, false)
  })
  default = {}
}

/******************************************
  Alerts and the dashboard (monitoring.tf)
 *****************************************/

variable "alerts" {
  description = <<-EOT
    Cloud Monitoring alert policies on afterlife's log-based metrics (docs/operations.md, "Observability"): dead
    letters, poison messages, recoveries retried for more than recovery_retry_minutes, orphaned
    versions with work, stuck workflows, the reaper not ticking for reaper_absent_seconds, function
    errors. notification_channels are google_monitoring_notification_channel IDs
    (projects/<p>/notificationChannels/<n>); with none, incidents open in the console only.
  EOT
  type = object({
    enabled                = optional(bool, true)
    notification_channels  = optional(list(string), [])
    recovery_retry_minutes = optional(number, 15)
    reaper_absent_seconds  = optional(number, 120)
    function_errors_per_5m = optional(number, 0)
    auto_close             = optional(string, "1800s")
  })
  default = {}

  validation {
    condition     = var.alerts.recovery_retry_minutes >= 1 && floor(var.alerts.recovery_retry_minutes) == var.alerts.recovery_retry_minutes
    error_message = "alerts.recovery_retry_minutes must be a whole number of minutes, at least 1."
  }
  validation {
    # Cloud Monitoring's metric-absence conditions take whole minutes, at least 2.
    condition     = var.alerts.reaper_absent_seconds >= 120 && var.alerts.reaper_absent_seconds % 60 == 0
    error_message = "alerts.reaper_absent_seconds must be a multiple of 60, at least 120."
  }
  validation {
    condition     = alltrue([for c in var.alerts.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", c))])
    error_message = "alerts.notification_channels are notification channel IDs: projects/<project>/notificationChannels/<id>."
  }
}

variable "dashboard" {
  description = "Create the Cloud Monitoring dashboard of infra/dashboard.json (recoveries, latency, deaths, ticks, repairs, dead letters)."
  type        = bool
  default     = true
}

variable "recovery_slo" {
  description = <<-EOT
    The recovery SLO (infra/slo.tf; docs/operations.md, "Recovery timelines"): goal of deaths whose moved work
    has its first step on another executor within threshold_ms of the death, over rolling_period_days, on the
    death_to_first_step log-based distribution. Burn-rate alerts (with alerts.enabled) page when the error
    budget burns faster than fast_burn_rate over 1 h and 5 min, or slow_burn_rate over 6 h and 30 min.
  EOT
  type = object({
    enabled             = optional(bool, true)
    threshold_ms        = optional(number, 5000)
    goal                = optional(number, 0.99)
    rolling_period_days = optional(number, 28)
    fast_burn_rate      = optional(number, 14.4)
    slow_burn_rate      = optional(number, 6)
  })
  default = {}

  validation {
    condition     = var.recovery_slo.threshold_ms >= 100 && floor(var.recovery_slo.threshold_ms) == var.recovery_slo.threshold_ms
    error_message = "recovery_slo.threshold_ms must be a whole number of ms, at least 100."
  }
  validation {
    condition     = var.recovery_slo.goal > 0 && var.recovery_slo.goal < 1
    error_message = "recovery_slo.goal is a fraction strictly between 0 and 1 (0.99 = 99 %)."
  }
  validation {
    # Cloud Monitoring's rolling windows: 1 to 30 days.
    condition     = var.recovery_slo.rolling_period_days >= 1 && var.recovery_slo.rolling_period_days <= 30 && floor(var.recovery_slo.rolling_period_days) == var.recovery_slo.rolling_period_days
    error_message = "recovery_slo.rolling_period_days must be a whole number from 1 to 30."
  }
  validation {
    condition     = var.recovery_slo.fast_burn_rate > 1 && var.recovery_slo.slow_burn_rate > 1
    error_message = "recovery_slo burn rates must be above 1 (1 spends the budget exactly over the period)."
  }
}
