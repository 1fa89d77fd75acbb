/******************************************
  Identities: one runtime service account per function, plus one for each caller
  (Scheduler → reaper, Pub/Sub push → executorDeath). Nobody else may invoke anything but drain.
 *****************************************/

locals {
  runtime_accounts = {
    executor_death = "afterlife executorDeath: recovers dead executors' workflows"
    reaper         = "afterlife reaper: detects dead executors, stuck and diverged workflows"
    drain          = "afterlife drain: drains executors during deploys"
  }

  # Cloud SQL grants are project-level; instanceUser is only needed for IAM database auth.
  runtime_project_roles = concat(["roles/cloudsql.client"], local.iam_db_auth ? ["roles/cloudsql.instanceUser"] : [])

  # Who publishes where (roles/pubsub.publisher on that one topic, nothing project-wide). Only the
  # reaper publishes death notices (the executors' kits do too: var.executor_service_accounts); drain
  # writes drain requests to Postgres and publishes nothing. executorDeath never publishes a death
  # notice; it can dead-letter a workflow when ORPHANED_VERSION_POLICY forks.
  publishers = {
    executor_deaths = {
      reaper = "serviceAccount:${google_service_account.runtime["reaper"].email}"
    }
    workflow_dead_letters = {
      reaper         = "serviceAccount:${google_service_account.runtime["reaper"].email}"
      executor_death = "serviceAccount:${google_service_account.runtime["executor_death"].email}"
    }
  }
}

resource "google_service_account" "runtime" {
  for_each = local.runtime_accounts

  project      = var.project_id
  account_id   = "${var.name_prefix}-${replace(each.key, "_", "-")}"
  display_name = each.value

  depends_on = [google_project_service.this]
}

resource "google_service_account" "scheduler" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-scheduler"
  display_name = "afterlife: Cloud Scheduler's identity when it calls the reaper (OIDC)"

  depends_on = [google_project_service.this]
}

resource "google_service_account" "trigger" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-trigger"
  display_name = "afterlife: Pub/Sub's identity when it pushes death notices to executorDeath (OIDC)"

  depends_on = [google_project_service.this]
}

/******************************************
  Runtime: Cloud SQL (connector + IAM database auth)
 *****************************************/

resource "google_project_iam_member" "runtime" {
  for_each = {
    for pair in setproduct(keys(local.runtime_accounts), local.runtime_project_roles) :
    "${pair[0]}/${pair[1]}" => { account = pair[0], role = pair[1] }
  }

  project = local.sql_project
  role    = each.value.role
  member  = "serviceAccount:${google_service_account.runtime[each.value.account].email}"
}

# The IAM database users. Their Postgres grants follow below.
resource "google_sql_user" "runtime" {
  for_each = { for key, description in local.runtime_accounts : key => description if var.cloud_sql.create_iam_users && local.iam_db_auth }

  project  = local.sql_project
  instance = local.sql_instance
  name     = local.db_users[each.key]
  type     = "CLOUD_IAM_SERVICE_ACCOUNT"
}

/******************************************
  Runtime: Postgres grants
 *****************************************/

locals {
  # One NOLOGIN role per function (afterlife_executor_death, afterlife_reaper, afterlife_drain), granted
  # to that function's database user: drain reads DBOS's tables, only executorDeath and the reaper write.
  db_roles = { for key in keys(local.runtime_accounts) : key => "${replace(var.name_prefix, "-", "_")}_${key}" }

  # The reaper tells a dead executor that runs without the kit by its DBOS sessions
  # (dbos_transact_<executorID>_…) missing from pg_stat_activity; Postgres shows other roles' sessions
  # only to members of pg_read_all_stats. Granting a predefined role takes an admin (on Cloud SQL a
  # cloudsqlsuperuser member), not the schema owner, so it is the one grant Terraform can run for you.
  admin_grants_sql = <<-EOT
    GRANT pg_read_all_stats TO "${local.db_users.reaper}";
  EOT

  # Everything the functions need, with this deployment's names (infra/grants.sql): run by the schema
  # owner after `afterlife-plane migrate` (the tables must exist), or rerun after a DBOS upgrade adds tables.
  function_grants_sql = templatefile("${path.module}/grants.sql", {
    dbos_schema         = var.afterlife.dbos_system_schema
    afterlife_schema    = var.afterlife.afterlife_schema
    executor_death_role = local.db_roles.executor_death
    reaper_role         = local.db_roles.reaper
    drain_role          = local.db_roles.drain
    executor_death_user = local.db_users.executor_death
    reaper_user         = local.db_users.reaper
    drain_user          = local.db_users.drain
  })

  database_grants_sql = <<-EOT
    ${local.function_grants_sql}
    ${local.admin_grants_sql}
  EOT
}

# Runs admin_grants_sql through the Cloud SQL Data API: no network path from where terraform runs to
# the instance, no second provider. Opt-in, because it needs the instance's Data API access and an
# IAM database user for the identity running terraform (var.database_grants).
resource "google_sql_provision_script" "admin_grants" {
  count = var.database_grants.apply ? 1 : 0

  project     = local.sql_project
  instance    = local.sql_instance
  database    = var.cloud_sql.database
  description = "afterlife: pg_read_all_stats for the reaper's database user"
  # GRANT of a role already held is a notice, not an error: rerunning the script is harmless.
  script = local.admin_grants_sql

  depends_on = [google_sql_user.runtime]
}

/******************************************
  Pub/Sub publishers
 *****************************************/

resource "google_pubsub_topic_iam_member" "executor_deaths_publisher" {
  for_each = merge(local.publishers.executor_deaths, { for key, email in var.executor_service_accounts : "executor/${key}" => "serviceAccount:${email}" })

  project = var.project_id
  topic   = google_pubsub_topic.executor_deaths.name
  role    = "roles/pubsub.publisher"
  member  = each.value
}

resource "google_pubsub_topic_iam_member" "workflow_dead_letters_publisher" {
  for_each = local.publishers.workflow_dead_letters

  project = var.project_id
  topic   = google_pubsub_topic.workflow_dead_letters.name
  role    = "roles/pubsub.publisher"
  member  = each.value
}

/******************************************
  Callers. run.invoker itself is granted per function in modules/function (invokers).
 *****************************************/

# Pub/Sub mints the OIDC token of each push delivery as the trigger's account. Needed on projects
# whose Pub/Sub service agent predates April 2021; harmless elsewhere; scoped to this one account.
resource "google_service_account_iam_member" "pubsub_mints_trigger_tokens" {
  service_account_id = google_service_account.trigger.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:${local.pubsub_service_agent}"
}
