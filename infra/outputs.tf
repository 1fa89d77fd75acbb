output "functions" {
  description = "The three functions: name, URI and Cloud Run service."
  value = {
    executor_death = { name = module.executor_death.name, uri = module.executor_death.uri, service = module.executor_death.service }
    reaper         = { name = module.reaper.name, uri = module.reaper.uri, service = module.reaper.service }
    drain          = { name = module.drain.name, uri = module.drain.uri, service = module.drain.service }
  }
}

output "service_accounts" {
  description = "Runtime accounts of the functions, and the callers' accounts."
  value = merge(
    { for key, sa in google_service_account.runtime : key => sa.email },
    { scheduler = google_service_account.scheduler.email, trigger = google_service_account.trigger.email },
  )
}

output "db_users" {
  description = "Postgres user of each function; grant them the SQL of docs/operations.md, \"Deploying to Google Cloud\", step 4."
  value       = local.db_users
}

output "database_grants_sql" {
  description = "The Postgres grants the functions need, with this deployment's schema and user names: run it as the schema owner after `afterlife-plane migrate` (docs/operations.md, \"Deploying to Google Cloud\", step 4)."
  value       = local.database_grants_sql
}

output "topics" {
  description = "Topic IDs."
  value = {
    executor_deaths             = google_pubsub_topic.executor_deaths.id
    executor_deaths_dead_letter = google_pubsub_topic.executor_deaths_dead_letter.id
    workflow_dead_letters       = google_pubsub_topic.workflow_dead_letters.id
  }
}

output "executor_death_subscription" {
  description = "The push subscription that delivers death notices to executorDeath (retry and dead-letter policies)."
  value       = google_pubsub_subscription.executor_death_push.id
}

output "redis" {
  description = "Memorystore host and port, the secret holding REDIS_URL and (with TLS) the one holding REDIS_CA_CERT: mount both in the executors too."
  value = var.redis.enabled ? {
    host       = google_redis_instance.this[0].host
    port       = google_redis_instance.this[0].port
    tls        = local.redis_tls
    url_secret = google_secret_manager_secret.redis_url[0].id
    ca_secret  = local.redis_tls ? google_secret_manager_secret.redis_ca[0].id : null
  } : null
}

output "reaper_job" {
  description = "Cloud Scheduler job that ticks the reaper."
  value       = google_cloud_scheduler_job.reaper.id
}

output "log_metrics" {
  description = "Log-based metric names, by event."
  value       = merge({ for key, m in google_logging_metric.event : key => m.name }, { recovery_latency = google_logging_metric.recovery_latency.name }, { for key, m in google_logging_metric.recovery_time : key => m.name })
}

output "source_object" {
  description = "The uploaded source archive, named by its content hash."
  value       = "gs://${google_storage_bucket_object.source.bucket}/${google_storage_bucket_object.source.name}"
}
