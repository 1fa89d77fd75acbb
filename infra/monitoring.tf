/******************************************
  Alert policies and the dashboard, on the log-based metrics of logging.tf

  Each policy's documentation is what the on-call reads in the notification: what it means and what
  to do. test/infra checks that every policy's metric is one this module creates (or a Pub/Sub metric
  of a subscription it creates), that each has documentation, and that the signals below are covered.
 *****************************************/

locals {
  # Log-based metrics are written by Cloud Run's logs: resource cloud_run_revision, one series per service.
  user_metric = "logging.googleapis.com/user"

  alert_doc_footer = <<-EOT

    Logs: `resource.type="cloud_run_revision" AND jsonPayload.event="<event>"` in Logs Explorer, or
    `afterlife-plane status` from a terminal with the functions' environment (docs/operations.md, "Operator CLI").
    Runbook: docs/operations.md, "Observability".
  EOT

  # Every alert policy, one entry each, for the one resource below. A policy opens an incident when any
  # of its conditions holds: a `thresholds` condition when its series, summed (or maxed) over `window`,
  # stays above `threshold` for `duration`; an `absences` condition when its series is missing for
  # `duration`. Each documentation ends with the footer; `~}` after it on the counters keeps their
  # text as it was deployed (no newline after the footer), so this layout changes nothing in a plan.
  alert_policies = {
    poison_message = {
      title    = "afterlife: poison messages acked"
      severity = "WARNING"
      thresholds = [{
        name      = "afterlife: poison messages acked (poison_message)"
        filter    = "metric.type=\"${local.user_metric}/${google_logging_metric.event["poison_message"].name}\" AND resource.type=\"cloud_run_revision\""
        threshold = 0
        window    = "300s"
        duration  = "0s"
        aligner   = "ALIGN_SUM"
        reducer   = "REDUCE_SUM"
        group_by  = null
      }]
      absences = []
      content  = <<-EOT
        A death notice or request was **acked without effect**: invalid JSON, a schema the code rejects,
        another application's notice, or a notice that failed permanently. Nothing was recovered for it.

        1. Read the `reason` of the `poison_message` lines: a publisher sending a wrong shape (an old kit,
           a hand-written `gcloud pubsub topics publish`) is the usual cause.
        2. If a real executor's work was meant, recover it by hand: `afterlife-plane recover <executorId> --dry-run`,
           then without `--dry-run`. The reaper also finds dead executors on its own.
        ${local.alert_doc_footer~}
      EOT
    }
    orphaned_version = {
      title    = "afterlife: work waiting on an application version no executor runs"
      severity = "ERROR"
      thresholds = [{
        name      = "afterlife: work waiting on an application version no executor runs (orphaned_version)"
        filter    = "metric.type=\"${local.user_metric}/${google_logging_metric.event["orphaned_version"].name}\" AND resource.type=\"cloud_run_revision\""
        threshold = 0
        window    = "300s"
        duration  = "0s"
        aligner   = "ALIGN_SUM"
        reducer   = "REDUCE_SUM"
        group_by  = null
      }]
      absences = []
      content  = <<-EOT
        PENDING or ENQUEUED workflows belong to an application version that no live executor runs, for
        longer than ORPHANED_VERSION_GRACE_MS. DBOS only hands a workflow to an executor of its own
        version, so they **wait forever** unless someone acts.

        1. `afterlife-plane status`: which version, how many rows.
        2. Either start an executor of that version (a rollback, or keep the old revision serving), or
           let afterlife fork them onto the latest version: ORPHANED_VERSION_POLICY = "fork-to-latest"
           (`afterlife.orphaned_version_policy`), which the reaper then applies on its next pass.
        ${local.alert_doc_footer~}
      EOT
    }
    stuck_workflow = {
      title    = "afterlife: stuck workflows"
      severity = "WARNING"
      thresholds = [{
        name      = "afterlife: stuck workflows (stuck_workflow)"
        filter    = "metric.type=\"${local.user_metric}/${google_logging_metric.event["stuck_workflow"].name}\" AND resource.type=\"cloud_run_revision\""
        threshold = 0
        window    = "300s"
        duration  = "0s"
        aligner   = "ALIGN_SUM"
        reducer   = "REDUCE_SUM"
        group_by  = null
      }]
      absences = []
      content  = <<-EOT
        A PENDING workflow on a **live** executor showed no activity for STUCK_AFTER_MS (default 1 h):
        no step recorded, no status change. Its executor beats, so it is not dead; a step is hung (an
        LLM call with no timeout, a lock wait) or the process is wedged.

        1. `afterlife-plane status` lists stuck counts per executor and the oldest activity.
        2. Look at that executor's logs for the workflow ID in the `stuck_workflow` line.
        3. With STUCK_POLICY = "report" (default) nothing is done for you: cancel and fork by hand
           (`afterlife-plane fork`) or set STUCK_POLICY = "cancel-and-fork".
        ${local.alert_doc_footer~}
      EOT
    }
    unguarded_application = {
      title    = "afterlife: kits of an application no plane guards"
      severity = "CRITICAL"
      thresholds = [{
        name      = "afterlife: kits of an application no plane guards (unguarded_application)"
        filter    = "metric.type=\"${local.user_metric}/${google_logging_metric.event["unguarded_application"].name}\" AND resource.type=\"cloud_run_revision\""
        threshold = 0
        window    = "300s"
        duration  = "0s"
        aligner   = "ALIGN_SUM"
        reducer   = "REDUCE_SUM"
        group_by  = null
      }]
      absences = []
      content  = <<-EOT
        Executors with the kit are registered in afterlife's database under an **application no plane
        guards**: no reaper ticks for that name, so when one of them dies its PENDING workflows are
        **never recovered**. Almost always a name mismatch: the kit registers under DBOS's application
        name, and the plane guards `DBOS_APPLICATION_NAME`.

        1. The `application`, `guarded` and `executorIds` of the `unguarded_application` line say which
           name the kits use and which one this plane guards; `afterlife-plane status` shows it too.
        2. Make them one name: set the plane's `afterlife.application_name` (DBOS_APPLICATION_NAME) to the
           kits' name, or the app's DBOS name (dbos-config.yaml `name`, DBOS.setConfig or
           DBOS_APPLICATION_NAME in the app) to the guarded one. Executors already dead under the other
           name: `afterlife-plane recover <executorId> --app <their application>`.
        ${local.alert_doc_footer~}
      EOT
    }
    repair_refused = {
      title    = "afterlife: a repair refused, to keep a transaction from running twice"
      severity = "ERROR"
      thresholds = [{
        name      = "afterlife: a repair refused, to keep a transaction from running twice (repair_refused)"
        filter    = "metric.type=\"${local.user_metric}/${google_logging_metric.event["repair_refused"].name}\" AND resource.type=\"cloud_run_revision\""
        threshold = 0
        window    = "300s"
        duration  = "0s"
        aligner   = "ALIGN_SUM"
        reducer   = "REDUCE_SUM"
        group_by  = null
      }]
      absences = []
      content  = <<-EOT
        A fork of a stuck or orphaned workflow was **not made**: a data-source transaction at its cut
        committed in the app's database (`transaction_completion`) but was never recorded as a step, so a
        fork (a new ID) would apply it a second time. Or that table is not readable by afterlife's role.
        The workflow waits: an orphan stays ENQUEUED on its version, a stuck one stays CANCELLED.

        1. The `why` of the `repair_refused` line names the workflow, the table and the step.
        2. Repair it under its own ID: set REPAIR_MODE = "rewind" (the default; the rewind is served the
           recorded transaction), start an executor of the orphan's version, or for a cancelled one call
           DBOS `resumeWorkflow`. If the table is unreadable, grant afterlife's role SELECT on it.
        ${local.alert_doc_footer~}
      EOT
    }
    # A nack in every 10-minute window (Pub/Sub's backoff is at most 600 s) for recovery_retry_minutes.
    recovery_retry = {
      title    = "afterlife: recoveries retried for more than ${var.alerts.recovery_retry_minutes} minutes"
      severity = "CRITICAL"
      thresholds = [{
        name      = "afterlife: recoveries retried for more than ${var.alerts.recovery_retry_minutes} minutes (recovery_retry)"
        filter    = "metric.type=\"${local.user_metric}/${google_logging_metric.event["recovery_retry"].name}\" AND resource.type=\"cloud_run_revision\""
        threshold = 0
        window    = "600s"
        duration  = "${var.alerts.recovery_retry_minutes * 60}s"
        aligner   = "ALIGN_SUM"
        reducer   = "REDUCE_SUM"
        group_by  = null
      }]
      absences = []
      content  = <<-EOT
        executorDeath has been **nacking death notices** (`recovery_retry`) for more than
        ${var.alerts.recovery_retry_minutes} minutes: a dead executor's workflows are not being re-enqueued.
        Pub/Sub keeps redelivering; after ${var.executor_death_dead_letter.max_delivery_attempts} attempts a
        notice goes to the dead-letter topic.

        1. The `code` of the `recovery_retry` lines says why: `db_busy` (the function's DB admission budget
           is exhausted: raise `functions.executor_death.max_instances` or `afterlife.db_pool_max`, or look
           for a long-running statement), a connection error (Cloud SQL down or unreachable), a lock error.
        2. Once the cause is fixed, redelivery finishes on its own. A notice already dead-lettered is
           replayed from `${google_pubsub_topic.executor_deaths_dead_letter.name}-hold`, or the executor is
           recovered by hand: `afterlife-plane recover <executorId>`.
        ${local.alert_doc_footer~}
      EOT
    }
    function_errors = {
      title    = "afterlife: function errors"
      severity = "ERROR"
      thresholds = [{
        name      = "afterlife: function errors (function_errors)"
        filter    = "metric.type=\"${local.user_metric}/${google_logging_metric.function_errors.name}\" AND resource.type=\"cloud_run_revision\""
        threshold = var.alerts.function_errors_per_5m
        window    = "300s"
        duration  = "0s"
        aligner   = "ALIGN_SUM"
        reducer   = "REDUCE_SUM"
        group_by  = null
      }]
      absences = []
      content  = <<-EOT
        afterlife's functions logged ERROR lines (outside the request log): a reaper invocation that
        failed, a drain request that failed, a crash or an out-of-memory kill of the container.

        1. Logs Explorer: `resource.type="cloud_run_revision" AND severity>=ERROR`, scoped to the
           afterlife-* services; the `err` field carries the cause.
        2. Database or Redis unreachable (connect timeouts) points at the VPC egress, Cloud SQL or
           Memorystore; a crash loop at start points at configuration (every variable is validated at
           start and named in the error).
        ${local.alert_doc_footer~}
      EOT
    }
    # Dead letters of either kind: workflows out of repairs, death notices out of delivery attempts.
    dead_letters = {
      title    = "afterlife: dead letters"
      severity = "CRITICAL"
      thresholds = [
        {
          name      = "a workflow exhausted its repairs (dead_letter)"
          filter    = "metric.type=\"${local.user_metric}/${google_logging_metric.event["dead_letter"].name}\" AND resource.type=\"cloud_run_revision\""
          threshold = 0
          window    = "60s"
          duration  = "0s"
          aligner   = "ALIGN_SUM"
          reducer   = "REDUCE_SUM"
          group_by  = null
        },
        {
          name      = "dead letters waiting in a hold subscription"
          filter    = "metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.type=\"pubsub_subscription\" AND resource.label.subscription_id=(\"${google_pubsub_subscription.hold["executor_deaths_dead_letter"].name}\" OR \"${google_pubsub_subscription.hold["workflow_dead_letters"].name}\")"
          threshold = 0
          window    = "300s"
          duration  = "0s"
          aligner   = "ALIGN_MAX"
          reducer   = "REDUCE_MAX"
          group_by  = ["resource.label.subscription_id"]
        },
      ]
      absences = []
      content  = <<-EOT
        Something afterlife could not finish on its own is waiting for a person.

        - **A workflow dead-lettered** (`dead_letter`, and a message on `${google_pubsub_topic.workflow_dead_letters.name}`):
          it diverged (`DBOSUnexpectedStepError`) again after MAX_REPAIRS repairs. Its lineage is in
          `afterlife.dead_letters` and the fork ledger. Fix the code path that replays differently, then
          `afterlife-plane fork <workflowId>` by hand, or cancel it.
        - **A death notice dead-lettered** (`${google_pubsub_subscription.hold["executor_deaths_dead_letter"].name}`):
          executorDeath failed it ${var.executor_death_dead_letter.max_delivery_attempts} times (transient
          errors only; poison is acked). Its `executorId` is an attribute: `afterlife-plane recover <executorId>`
          once the cause (see the "recoveries retried" alert) is gone.

        Ack the held message (`gcloud pubsub subscriptions pull --auto-ack <hold subscription>`) when it is
        handled: this condition stays open while the hold subscription has undelivered messages.
        ${local.alert_doc_footer}
      EOT
    }
    # The watcher itself: the reaper ticks every REAPER_TICK_MS inside each per-minute invocation and sums
    # its ticks in one `reaper_ticks` line a minute (and one per invocation), idle or not; quiet ticks log
    # nothing of their own (docs/logging.md). No summary for 2 minutes means Scheduler, the function or its
    # lease is broken and nobody detects deaths.
    reaper_not_ticking = {
      title      = "afterlife: the reaper is not ticking"
      severity   = "CRITICAL"
      thresholds = []
      absences = [{
        name     = "no reaper_ticks summary for ${var.alerts.reaper_absent_seconds} s"
        filter   = "metric.type=\"${local.user_metric}/${google_logging_metric.event["reaper_ticks"].name}\" AND resource.type=\"cloud_run_revision\""
        window   = "60s"
        duration = "${var.alerts.reaper_absent_seconds}s"
        aligner  = "ALIGN_SUM"
        reducer  = "REDUCE_SUM"
      }]
      content = <<-EOT
        No `reaper_ticks` summary (one a minute while the reaper ticks) for ${var.alerts.reaper_absent_seconds} s. **Dead executors are not being detected**
        (their workflows stay PENDING) until the reaper runs again; death notices from the kit still recover.

        1. Is the job running? `gcloud scheduler jobs describe ${google_cloud_scheduler_job.reaper.name} --location=${var.region}`
           (state ENABLED, `reaper_schedule.paused` false) and its last attempt's status.
        2. Does the function answer? Its logs: `reaper_failed` (the `err` says why: database, Redis,
           configuration), `reaper_skipped` on every run (another invocation holds the lease: a wedged
           instance; it expires after REAPER_LEASE_MS), or 403 in the request log (the scheduler account
           lost `roles/run.invoker`).
        3. Meanwhile `afterlife-plane reap` from a terminal runs the same passes once.

        This policy never fires on a deployment whose reaper has not ticked once yet (no series to miss).
        ${local.alert_doc_footer}
      EOT
    }
  }
}

resource "google_monitoring_alert_policy" "this" {
  for_each = { for name, policy in local.alert_policies : name => policy if var.alerts.enabled }

  project               = var.project_id
  display_name          = each.value.title
  combiner              = "OR"
  severity              = each.value.severity
  notification_channels = var.alerts.notification_channels
  user_labels           = local.labels

  dynamic "conditions" {
    for_each = each.value.thresholds
    content {
      display_name = conditions.value.name
      condition_threshold {
        filter          = conditions.value.filter
        comparison      = "COMPARISON_GT"
        threshold_value = conditions.value.threshold
        duration        = conditions.value.duration
        aggregations {
          alignment_period     = conditions.value.window
          per_series_aligner   = conditions.value.aligner
          cross_series_reducer = conditions.value.reducer
          group_by_fields      = conditions.value.group_by
        }
        trigger {
          count = 1
        }
      }
    }
  }

  dynamic "conditions" {
    for_each = each.value.absences
    content {
      display_name = conditions.value.name
      condition_absent {
        filter   = conditions.value.filter
        duration = conditions.value.duration
        aggregations {
          alignment_period     = conditions.value.window
          per_series_aligner   = conditions.value.aligner
          cross_series_reducer = conditions.value.reducer
        }
        trigger {
          count = 1
        }
      }
    }
  }

  documentation {
    subject   = each.value.title
    mime_type = "text/markdown"
    content   = each.value.content
  }

  alert_strategy {
    auto_close = var.alerts.auto_close
  }
}

# The policies had a resource each (or one for the threshold counters): state follows them here, so an
# apply of this layout destroys and recreates nothing.
moved {
  from = google_monitoring_alert_policy.threshold
  to   = google_monitoring_alert_policy.this
}

moved {
  from = google_monitoring_alert_policy.dead_letters[0]
  to   = google_monitoring_alert_policy.this["dead_letters"]
}

moved {
  from = google_monitoring_alert_policy.reaper_not_ticking[0]
  to   = google_monitoring_alert_policy.this["reaper_not_ticking"]
}

/******************************************
  Dashboard: dashboard.json, with the metric names of this deployment filled in
 *****************************************/

resource "google_monitoring_dashboard" "this" {
  count = var.dashboard ? 1 : 0

  project = var.project_id
  dashboard_json = templatefile("${path.module}/dashboard.json", {
    metric_prefix = "${local.user_metric}/${var.name_prefix}"
    # The sanitised label, not the raw name: a quote in the app's name would break the JSON.
    title = "afterlife (${local.labels["afterlife-app"]})"
  })

  depends_on = [google_logging_metric.event, google_logging_metric.recovery_latency, google_logging_metric.retention, google_logging_metric.recovery_time]
}
