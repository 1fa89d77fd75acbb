/******************************************
  Recovery as a number (docs/operations.md, "Recovery timelines"): the reaper logs one
  `recovery_timeline` line per death once its moved work has all started elsewhere; these log-based
  distributions carry its two gaps, an SLO holds afterlife to "a dead executor's work re-runs within
  recovery_slo.threshold_ms", and multi-window burn-rate alerts page when the error budget goes too fast.
  test/infra checks that the metrics, the SLO on them and both burn-rate policies exist.
 *****************************************/

locals {
  # Per death, from the recovery_timeline line: death (last sign of life) → first re-enqueued, and →
  # the first step of a moved workflow on another executor (DBOS's own step record).
  recovery_time_metrics = {
    death_to_reenqueued = "deathToReenqueuedMs"
    death_to_first_step = "deathToFirstStepMs"
  }

  # The multi-window, multi-burn-rate policy of the SRE workbook, for a 28-day budget: the long window
  # measures the burn, the short one stops the page once the burn has stopped.
  recovery_slo_burn_alerts = {
    fast = { long = "3600s", short = "300s", burn = var.recovery_slo.fast_burn_rate, severity = "CRITICAL", spends = "2 %" }
    slow = { long = "21600s", short = "1800s", burn = var.recovery_slo.slow_burn_rate, severity = "ERROR", spends = "5 %" }
  }
}

resource "google_logging_metric" "recovery_time" {
  for_each = local.recovery_time_metrics

  project     = var.project_id
  name        = "${var.name_prefix}/${each.key}"
  description = "recovery_timeline lines: ${each.value} (ms from a death to its work re-enqueued / running elsewhere), one value per death"
  # A death that moved nothing has no such stage: the line leaves the field out.
  filter = "${local.log_scope} AND jsonPayload.event=\"recovery_timeline\" AND jsonPayload.${each.value}:*"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "ms"
    labels {
      key         = "cause"
      value_type  = "STRING"
      description = "crash, lost-host, sigterm, drain or manual"
    }
  }

  value_extractor  = "EXTRACT(jsonPayload.${each.value})"
  label_extractors = { cause = "EXTRACT(jsonPayload.cause)" }

  # Doubling buckets with a boundary at the SLO's threshold (threshold/64 … threshold × 2^13), so the
  # SLO's cut at the threshold counts whole buckets.
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 20
      growth_factor      = 2
      scale              = var.recovery_slo.threshold_ms / 64
    }
  }

  depends_on = [google_project_service.this]
}

resource "google_monitoring_custom_service" "recovery" {
  count = var.recovery_slo.enabled ? 1 : 0

  project      = var.project_id
  display_name = "afterlife recovery (${local.labels["afterlife-app"]})"
  user_labels  = local.labels
}

resource "google_monitoring_slo" "recovery" {
  count = var.recovery_slo.enabled ? 1 : 0

  project             = var.project_id
  service             = google_monitoring_custom_service.recovery[0].service_id
  display_name        = "${var.recovery_slo.goal * 100} % of deaths' work re-running within ${var.recovery_slo.threshold_ms} ms (${var.recovery_slo.rolling_period_days} days)"
  goal                = var.recovery_slo.goal
  rolling_period_days = var.recovery_slo.rolling_period_days
  user_labels         = local.labels

  request_based_sli {
    distribution_cut {
      distribution_filter = "metric.type=\"${local.user_metric}/${google_logging_metric.recovery_time["death_to_first_step"].name}\" AND resource.type=\"cloud_run_revision\""
      range {
        max = var.recovery_slo.threshold_ms
      }
    }
  }
}

resource "google_monitoring_alert_policy" "recovery_slo_burn" {
  for_each = var.alerts.enabled && var.recovery_slo.enabled ? local.recovery_slo_burn_alerts : {}

  project               = var.project_id
  display_name          = "afterlife: recovery SLO burning fast (${each.key})"
  combiner              = "AND"
  severity              = each.value.severity
  notification_channels = var.alerts.notification_channels
  user_labels           = local.labels

  # Both windows over the burn rate: the long one proves a real burn, the short one that it still goes on.
  conditions {
    display_name = "recovery SLO burn rate over ${each.value.long} above ${each.value.burn}"
    condition_threshold {
      filter          = "select_slo_burn_rate(\"${google_monitoring_slo.recovery[0].name}\", \"${each.value.long}\")"
      comparison      = "COMPARISON_GT"
      threshold_value = each.value.burn
      duration        = "0s"
      trigger {
        count = 1
      }
    }
  }

  conditions {
    display_name = "recovery SLO burn rate over ${each.value.short} above ${each.value.burn}"
    condition_threshold {
      filter          = "select_slo_burn_rate(\"${google_monitoring_slo.recovery[0].name}\", \"${each.value.short}\")"
      comparison      = "COMPARISON_GT"
      threshold_value = each.value.burn
      duration        = "0s"
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = var.alerts.auto_close
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Dead executors' work is waiting longer than the recovery SLO allows: more than
      ${100 - var.recovery_slo.goal * 100} % of deaths' moved work took over ${var.recovery_slo.threshold_ms} ms from the
      death to its first step on another executor, fast enough to spend ${each.value.spends} of the
      ${var.recovery_slo.rolling_period_days}-day error budget in ${each.value.long}.

      1. `afterlife-plane status`: deaths of the last 24 h, p50/p95/max death → first step elsewhere, and the
         slowest death; `afterlife-plane timeline <executorId>` draws it: which stage took the time (declared
         late: detection, the reaper's ticks, AFTERLIFE_LIVENESS_LEASE_MS for lost hosts; notice late:
         Pub/Sub; first step late: no live executor of the version, a busy queue).
      2. Deaths by cause are on the dashboard's heatmap (label `cause`); SIGTERM deaths include the drain's
         grace by design.
      ${local.alert_doc_footer}
    EOT
  }
}
