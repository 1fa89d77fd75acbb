/******************************************
  Source: one archive of the built package, named by its content hash so a code change redeploys
 *****************************************/

resource "google_storage_bucket" "source" {
  count = var.source_bucket == null ? 1 : 0

  project                     = var.project_id
  name                        = "${var.project_id}-${var.name_prefix}-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true
  labels                      = local.labels

  lifecycle_rule {
    condition {
      age = 30
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.this]
}

data "archive_file" "source" {
  type        = "zip"
  source_dir  = var.source_dir
  output_path = "${path.root}/.terraform/build/afterlife-source.zip"
  excludes    = ["node_modules", ".git"]
}

resource "google_storage_bucket_object" "source" {
  name   = "afterlife-${data.archive_file.source.output_md5}.zip"
  bucket = var.source_bucket == null ? google_storage_bucket.source[0].name : var.source_bucket
  source = data.archive_file.source.output_path
}

locals {
  source_archive = {
    bucket = google_storage_bucket_object.source.bucket
    object = google_storage_bucket_object.source.name
  }
}

/******************************************
  The three functions. entry_point must be a target functions/index.ts registers.
  Three explicit calls rather than one for_each: who may invoke each function, and what triggers it,
  stays readable in review and checkable by test/infra without evaluating Terraform.
 *****************************************/

module "executor_death" {
  source = "./modules/function"

  project_id                   = var.project_id
  region                       = var.region
  name                         = "${var.name_prefix}-executor-death"
  description                  = "Recovers a dead DBOS executor's PENDING workflows (death notices pushed by Pub/Sub)."
  entry_point                  = "executorDeath"
  source_archive               = local.source_archive
  service_account_email        = google_service_account.runtime["executor_death"].email
  service                      = local.function_settings.executor_death
  environment_variables        = merge(local.common_env, local.function_env.executor_death)
  secret_environment_variables = local.secret_env
  vpc                          = local.vpc
  labels                       = local.labels
  build_service_account        = var.build_service_account

  # No Eventarc trigger: death notices arrive through our own push subscription (pubsub.tf), which
  # carries the dead-letter and retry policies. Its OIDC identity is the only invoker.
  invokers = {
    trigger = "serviceAccount:${google_service_account.trigger.email}"
  }

  depends_on = [google_project_service.this, google_project_iam_member.runtime, google_secret_manager_secret_iam_member.redis_url_runtime, google_secret_manager_secret_version.redis_url, google_secret_manager_secret_iam_member.redis_ca, google_secret_manager_secret_version.redis_ca]
}

module "reaper" {
  source = "./modules/function"

  project_id                   = var.project_id
  region                       = var.region
  name                         = "${var.name_prefix}-reaper"
  description                  = "Finds dead executors by lapsed heartbeats, stuck and diverged workflows (Cloud Scheduler)."
  entry_point                  = "reaper"
  source_archive               = local.source_archive
  service_account_email        = google_service_account.runtime["reaper"].email
  service                      = local.function_settings.reaper
  environment_variables        = merge(local.common_env, local.function_env.reaper)
  secret_environment_variables = local.secret_env
  vpc                          = local.vpc
  labels                       = local.labels
  build_service_account        = var.build_service_account

  invokers = {
    scheduler = "serviceAccount:${google_service_account.scheduler.email}"
  }

  depends_on = [google_project_service.this, google_project_iam_member.runtime, google_secret_manager_secret_iam_member.redis_url_runtime, google_secret_manager_secret_version.redis_url, google_secret_manager_secret_iam_member.redis_ca, google_secret_manager_secret_version.redis_ca]
}

module "drain" {
  source = "./modules/function"

  project_id                   = var.project_id
  region                       = var.region
  name                         = "${var.name_prefix}-drain"
  description                  = "Drains executors on purpose during deploys and reports progress (private HTTP)."
  entry_point                  = "drain"
  source_archive               = local.source_archive
  service_account_email        = google_service_account.runtime["drain"].email
  service                      = local.function_settings.drain
  environment_variables        = merge(local.common_env, local.function_env.drain)
  secret_environment_variables = local.secret_env
  vpc                          = local.vpc
  labels                       = local.labels
  build_service_account        = var.build_service_account

  # Private: only the members named in drain_invokers (deployers, CI) may call it.
  invokers = var.drain_invokers

  depends_on = [google_project_service.this, google_project_iam_member.runtime, google_secret_manager_secret_iam_member.redis_url_runtime, google_secret_manager_secret_version.redis_url, google_secret_manager_secret_iam_member.redis_ca, google_secret_manager_secret_version.redis_ca]
}
