/******************************************
  Cloud Scheduler → reaper, every minute, authenticated with an OIDC token of its own account.
  No Scheduler retries: the reaper is idempotent and the next tick a minute later is the retry; retries
  would only stack invocations behind the reaper's single-flight lease.
 *****************************************/

resource "google_cloud_scheduler_job" "reaper" {
  project     = var.project_id
  region      = var.region
  name        = "${var.name_prefix}-reaper"
  description = "Ticks the afterlife reaper; one invocation ticks every REAPER_TICK_MS until its budget ends."
  schedule    = var.reaper_schedule.schedule
  time_zone   = var.reaper_schedule.time_zone
  paused      = var.reaper_schedule.paused
  # Scheduler waits for the whole invocation (its ticks run until the function's budget ends), plus
  # slack for a cold start. HTTP targets allow at most 1800 s; var.functions keeps the reaper's timeout
  # within that, and min() holds the line should a default change.
  attempt_deadline = "${min(local.function_settings.reaper.timeout_seconds + 30, 1800)}s"

  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = module.reaper.uri
    body        = base64encode(jsonencode({ source = "cloud-scheduler" }))
    headers = {
      "Content-Type" = "application/json"
    }

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = module.reaper.uri
    }
  }

  depends_on = [google_project_service.this]
}
